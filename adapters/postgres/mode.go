// The provider's mode, read from the server: superuser, or delegated (CREATEROLE and CREATEDB),
// and the powers each gives.

package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/novox/postgres-provider/ports"
)

// Mode is how the provider's role stands on the server, read from the server at every check of
// it as a whole (Standing), never configured.
type Mode string

const (
	// ModeSuperuser is a provider whose role is a superuser: it reads stored verifiers, and
	// creates every extension the server has.
	ModeSuperuser Mode = "superuser"
	// ModeDelegated is a provider whose role may create roles and databases and is not a
	// superuser, as the admin of a managed server (RDS, Cloud SQL, Azure) is: it checks a
	// consumer's password by logging in with it, acts as the consumer's owner through a
	// membership of its own (SET, never INHERIT where the server lets it choose), and creates
	// the extensions the server lets it: trusted ones, and those the platform allow-lists.
	ModeDelegated Mode = "delegated"
)

// serverRole is what the server says of the provider's role, and the powers that gives it on
// that server's version, worked out once as it is learned.
type serverRole struct {
	mode   Mode
	powers powers
}

// Mode is the mode the server was last found in; "" before it was asked.
func (b *Backend) Mode() Mode {
	if s := b.role.Load(); s != nil {
		return s.mode
	}
	return ""
}

// Kind is the mode the server was last found in as a plain word, "" before it was asked.
func (b *Backend) Kind() string { return string(b.Mode()) }

// powers is every difference the provider's mode makes, chosen here and nowhere else: what a
// superuser does itself, and how a provider that is not one does without. A file asks for the
// power it needs, never which mode the provider is in.
type powers struct {
	// readsVerifiers: it reads a role's stored verifier (pg_authid) and checks the minted
	// password against it; without, it checks by logging in with the password (checkInside),
	// on a pass that grants the login, and takes the others' as held until their turn.
	readsVerifiers bool
	// quiets: it turns the server's logging off for its own statements (roleTxSQL, a lock's
	// session), and sends a verifier in the statement; without, it sends the verifier as a
	// parameter of a function of its session's own (writeRole), on a server found not to log it.
	quiets bool
	// takesSuperAttributes: a role it writes is said NOSUPERUSER NOREPLICATION NOBYPASSRLS;
	// without, the server refuses even their absence.
	takesSuperAttributes bool
	// revokesAny: it may revoke any membership; without, a revoke may be denied (from 16, what
	// a role whose privileges it lacks granted), which is said, and the grant stays drift.
	revokesAny bool
	// asMember: it acts as a consumer's owner through a membership of its own (GRANT role TO
	// CURRENT_USER, SET LOCAL ROLE), keeps CONNECT and CREATE on the consumer's database, and
	// ends its own sessions there before dropping it as the owner; setOnly: that membership is
	// SET, never INHERIT (from 16, where a membership says so).
	asMember, setOnly bool
	// adoptsAdministered: it takes over only a role it has the ADMIN option on (from 16).
	adoptsAdministered bool
	// seesPrepared: it reads which prepared transaction holds a role's row, and may roll it back.
	seesPrepared bool
	// refusable: the server may refuse it an extension, or an extension's update (not trusted,
	// not on the platform's allow-list): a refusal of that consumer's, said once, not an error.
	refusable bool
	// schemaOwner is who must own the extensions schema, in a refusal's words.
	schemaOwner string
}

// superuserPowers are a superuser's powers, which the provider assumes before the server was
// asked.
var superuserPowers = powers{readsVerifiers: true, quiets: true, takesSuperAttributes: true, revokesAny: true,
	seesPrepared: true, schemaOwner: "a superuser"}

// powersOf are the powers of the provider's role self in mode on a server of version.
func powersOf(mode Mode, version int, self string) powers {
	if mode != ModeDelegated {
		return superuserPowers
	}
	from16 := version >= 160000
	return powers{asMember: true, setOnly: from16, adoptsAdministered: from16, refusable: true,
		schemaOwner: "the provider's role " + self}
}

// powers is what the provider may do in the mode the server was last found in (a superuser's
// before it was asked).
func (b *Backend) powers() powers {
	if s := b.role.Load(); s != nil {
		return s.powers
	}
	return superuserPowers
}

// ChecksByLogin is whether HoldsAll checks passwords by logging in: where the provider may not
// read them (powers), as last found.
func (b *Backend) ChecksByLogin() bool { return !b.powers().readsVerifiers }

var _ ports.LoginChecker = (*Backend)(nil)

// sqlServerRole reads whether the server is in recovery (a standby), what serverRole holds,
// whether the role may create roles and databases, and the settings under which the server would log a statement's parameters, or a nested
// statement's text, in this session: what a provider that is not a superuser cannot turn off.
const sqlServerRole = `SELECT pg_catalog.pg_is_in_recovery(), rolsuper, rolcreaterole, rolcreatedb, pg_catalog.current_setting('server_version_num')::int,
       array_remove(CASE WHEN pg_catalog.current_setting('log_parameter_max_length')::int <> 0 THEN ARRAY[
               CASE WHEN pg_catalog.current_setting('log_statement') = 'all' THEN 'log_statement = all' END,
               CASE WHEN pg_catalog.current_setting('log_min_duration_statement')::int >= 0
                    THEN 'log_min_duration_statement = ' || pg_catalog.current_setting('log_min_duration_statement') END,
               CASE WHEN pg_catalog.current_setting('log_min_duration_sample')::int >= 0
                         AND pg_catalog.current_setting('log_statement_sample_rate')::float8 > 0
                    THEN 'log_min_duration_sample = ' || pg_catalog.current_setting('log_min_duration_sample') END,
               CASE WHEN pg_catalog.current_setting('log_transaction_sample_rate')::float8 > 0
                    THEN 'log_transaction_sample_rate = ' || pg_catalog.current_setting('log_transaction_sample_rate') END]
           ELSE '{}'::text[] END
           || ARRAY[CASE WHEN pg_catalog.current_setting('pg_stat_statements.track', true) = 'all'
                              AND pg_catalog.current_setting('pg_stat_statements.track_utility', true) = 'on'
                         THEN 'pg_stat_statements.track = all' END], NULL)
FROM pg_catalog.pg_roles WHERE rolname = current_user`

// Standing checks the server as a whole, in one round trip: reachable, not in recovery (a standby
// is of kind ports.ErrInRecovery), the provider let in, and a superuser or allowed to create
// roles and databases (its mode, read afresh each time). Its error says what is wrong, and what
// to do.
func (b *Backend) Standing(ctx context.Context) error {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return b.reach.serverError(err)
	}
	defer conn.Release()
	var recovery, super, createRole, createDB bool
	var version int
	var loud []string
	if err := conn.QueryRow(ctx, sqlServerRole).Scan(&recovery, &super, &createRole, &createDB, &version, &loud); err != nil {
		return b.reach.serverError(err)
	}
	if recovery { // nothing it says is the provider's to act on: a primary's record may differ
		return b.reach.inRecovery(conn.Conn().PgConn())
	}
	mode, err := modeOf(super, createRole, createDB, loud, b.reach.server, b.self)
	if err != nil {
		return err
	}
	// Superuser mode is the provider's first and usual one: named once it is left or entered
	// again, delegated mode always.
	if old := b.role.Swap(&serverRole{mode: mode, powers: powersOf(mode, version, b.self)}); old == nil && mode == ModeDelegated || old != nil && old.mode != mode {
		b.voice.say(slog.LevelInfo, "", "the provider's role %s on %s: %s mode", b.self, b.reach.server, mode)
	}
	if b.archives != nil && !b.archives.checked.Swap(true) {
		_ = b.archives.dumpable(ctx, version/10000) // a pg_dump that cannot dump the server is said at the start
	}
	return nil
}

// modeOf is the mode of the provider's role self on server, from what sqlServerRole answered;
// an error says what the role lacks where it can be neither, or, where it is not a superuser,
// which of the server's settings would log the verifiers it writes.
func modeOf(super, createRole, createDB bool, loud []string, server, self string) (Mode, error) {
	if super {
		return ModeSuperuser, nil
	}
	var lacks []string
	if !createRole {
		lacks = append(lacks, "CREATEROLE")
	}
	if !createDB {
		lacks = append(lacks, "CREATEDB")
	}
	if len(lacks) > 0 {
		return "", fmt.Errorf("the server %s: the provider's role %s is not a superuser and lacks %s, so it can neither "+
			"create consumers' roles nor their databases; connect as a superuser, or give the role CREATEROLE and "+
			"CREATEDB (--database-url)", server, self, strings.Join(lacks, " and "))
	}
	if len(loud) > 0 {
		return "", fmt.Errorf("the server %s logs what the provider would send it (%s): the verifier of a consumer's password "+
			"would be in its log, and the provider's role %s is not a superuser, which could turn that off for its "+
			"own statements; set log_parameter_max_length = 0 for the role (ALTER ROLE %s SET ..., as a superuser or "+
			"in the platform's parameter group), or turn that logging off", server, strings.Join(loud, ", "), self, self)
	}
	return ModeDelegated, nil
}
