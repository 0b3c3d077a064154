// A consumer's settings: derived.settings, set for its role in its database (ALTER ROLE ... IN
// DATABASE ... SET), checked with the rest of what is held, limited to an allow-list.

package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// DefaultAllowSettings is Config.AllowSettings' default: per-session limits, which bound what a
// consumer's sessions may take of a shared server and which (but temp_file_limit, a bound only
// a superuser may lift) a consumer could set for itself.
var DefaultAllowSettings = []string{
	"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "idle_session_timeout",
	"transaction_timeout", "work_mem", "maintenance_work_mem", "temp_buffers", "hash_mem_multiplier",
	"temp_file_limit", "max_parallel_workers_per_gather", "max_parallel_maintenance_workers",
}

// superuserLimits are the settings only a superuser may set that are allowed all the same: they
// only bound what a consumer may use.
var superuserLimits = []string{"temp_file_limit"}

// settingLiteral quotes a setting's value as a string constant whatever
// standard_conforming_strings says: an escape string, backslashes and quotes doubled.
func settingLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// vetSettings is what Create and Foresee ask of a consumer's settings before anything is written: that
// each is a parameter the server knows and one a consumer could set (context user), or a bound
// only a superuser may lift (superuserLimits), and that the server takes each value, tried as
// a session would take it (set_config, local to a transaction or savepoint rolled back). A value
// the server rejects is refused before the role is made, with the server's words, so that a
// plan foresees it and a pass does not ask again on every try.
func vetSettings(ctx context.Context, sp pgx.Tx, settings []setting) error {
	// One round trip: the settings' contexts, then each value tried with set_config local to
	// the savepoint sp, which its caller rolls back: no value outlives the question. A context
	// refused is said before a value the server rejects.
	names := make([]string, len(settings))
	for i, s := range settings {
		names[i] = s.name
	}
	batch := &pgx.Batch{}
	batch.Queue(`SELECT name::text, context::text FROM pg_catalog.pg_settings WHERE name = ANY($1)`, names)
	var tried []string
	for _, s := range settings {
		if s.value != nil { // a reset takes nothing
			batch.Queue(`SELECT pg_catalog.set_config($1, $2, true)`, s.name, *s.value)
			tried = append(tried, s.name)
		}
	}
	results := sp.SendBatch(ctx, batch)
	defer results.Close()
	contexts := map[string]string{}
	var name, where string
	rows, err := results.Query()
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&name, &where}, func() error { contexts[name] = where; return nil })
	}
	if err != nil {
		return fmt.Errorf("read settings: %w", err)
	}
	for _, s := range settings {
		switch c, known := contexts[s.name]; {
		case !known:
			return invalid(fmt.Errorf("setting %s: not a parameter this server knows", s.name))
		case c == "user", c == "superuser" && slices.Contains(superuserLimits, s.name):
		default:
			return invalid(fmt.Errorf("setting %s: a consumer's role cannot have it (its context is %s)", s.name, c))
		}
	}
	for _, name := range tried {
		if _, err := results.Exec(); err != nil {
			return settingRefused(name, err)
		}
	}
	return results.Close()
}

// vetWithin is vetSettings asked in tx, in a savepoint rolled back whatever it answers (so
// that no value tried outlives it, and a value refused does not end tx), as Create and Foresee
// ask it before they decide: a refusal of the settings is answered as refusal, trouble asking
// the server as err.
func vetWithin(ctx context.Context, tx pgx.Tx, settings []setting) (refusal, err error) {
	if len(settings) == 0 {
		return nil, nil
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	vet := vetSettings(ctx, sp, settings)
	if err := sp.Rollback(ctx); err != nil && vet == nil {
		return nil, err
	}
	if vet != nil && !ports.IsRefusal(vet) {
		return nil, vet
	}
	return vet, nil
}

// settingRefused is the server's refusal of a setting's value, or of the provider's setting
// it, as a refusal of the consumer's entry or of the provider; other errors as they are.
func settingRefused(name string, err error) error {
	switch pgCode(err) {
	case invalidParameterValue, invalidTextRepresentation:
		return invalid(fmt.Errorf("setting %s: %s", name, pgMessage(err)))
	case insufficientPrivilege: // a provider that is not a superuser, on a bound only one may set
		return refused(fmt.Errorf("setting %s: the provider may not set it: %s (from PostgreSQL 15 a "+
			"superuser can let it: GRANT SET ON PARAMETER %s TO the provider's role)", name, pgMessage(err), name))
	}
	return fmt.Errorf("set %s: %w", name, err)
}

// writeSettings sets, or resets, for d's role in its database each of d's settings (vetted
// first: vetSettings) that a change of cs, the verdict's, says differs (settingWriter), in
// their order, and answers whether it changed one.
func writeSettings(ctx context.Context, conn *pgxpool.Conn, d definition, cs []change) (changed bool, err error) {
	for _, c := range cs {
		if c.kind.writer() != settingWriter {
			continue
		}
		at := slices.IndexFunc(d.settings, func(s setting) bool { return s.name == c.subject })
		if at < 0 {
			continue
		}
		if _, err := conn.Exec(ctx, settingSQL(d.role, d.database, d.settings[at])); err != nil {
			return changed, settingRefused(c.subject, err)
		}
		changed = true
	}
	return changed, nil
}

// settingSQL is the statement that gives role the setting s in db, or resets it there where s
// names no value.
func settingSQL(role, db string, s setting) string {
	if s.value == nil {
		return "ALTER ROLE " + ident(role) + " IN DATABASE " + ident(db) + " RESET " + ident(s.name)
	}
	return "ALTER ROLE " + ident(role) + " IN DATABASE " + ident(db) + " SET " + ident(s.name) + " = " + settingLiteral(*s.value)
}
