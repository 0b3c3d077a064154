package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
)

// updateTrap installs ext at versions 1.0 and 1.1 (the default), whose 1.0 -> 1.1 script calls
// upper() unqualified, as third-party scripts do, and requires the extensions requires names.
func updateTrap(e *env, ext, requires string) {
	control := "comment = 'an update calling upper() unqualified, for the tests of the provider'\ndefault_version = '1.1'\nrelocatable = true\nsuperuser = true\n"
	if requires != "" {
		control += "requires = '" + requires + "'\n"
	}
	e.srv.InstallExtension(e.t, map[string]string{
		ext + ".control":       control,
		ext + "--1.0.sql":      "CREATE FUNCTION " + ext + "_zero() RETURNS int LANGUAGE sql AS 'SELECT 0';\n",
		ext + "--1.0--1.1.sql": "SELECT upper('probe'::varchar);\n",
	})
}

// plantUpper has the consumer p plant public.upper(varchar), which records who ran it and
// tries to make p a superuser.
func (e *env) plantUpper(p ports.Provision) {
	e.t.Helper()
	conn := e.mustLogin(p.As, p.Password, p.As)
	_, err := conn.Exec(ctx, fmt.Sprintf(`
CREATE TABLE public.who_ran (who text, super bool);
GRANT INSERT ON public.who_ran TO PUBLIC;
CREATE FUNCTION public.upper(varchar) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
	INSERT INTO public.who_ran SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user;
	BEGIN
		EXECUTE 'ALTER ROLE %s SUPERUSER';
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
	RETURN 'planted';
END $f$;`, p.As))
	is.New(e.t).NoErr(err) // the trap is set
}

// trapNeverRan asserts that what plantUpper planted for p never ran: p is no superuser, and
// nothing was recorded.
func (e *env) trapNeverRan(p ports.Provision) {
	e.t.Helper()
	is := is.New(e.t)
	var super bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = $1", p.As).Scan(&super))
	is.True(!super) // the consumer gained nothing
	var ran int
	is.NoErr(e.admin(p.As).QueryRow(ctx, "SELECT count(*) FROM public.who_ran").Scan(&ran))
	is.Equal(ran, 0) // the planted function never ran
}

// An update's script runs as a superuser with the extension's schema, and those of the
// extensions it requires, as its search path: where the consumer can write one of them (an
// extension left in public, or requiring one there), the update is refused, saying why, and
// never run; nothing the consumer planted runs as a superuser.
func TestAnUpdateNeverRunsWhereTheConsumerCanWrite(t *testing.T) {
	for _, c := range []struct{ name, setup string }{
		{"installed in public", "public"},
		{"requiring one in public", "requires"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t)
			ext := "novox_uptrap_" + c.setup + "_" + run
			base := ""
			if c.setup == "requires" {
				base = "novox_upbase_" + run
				e.srv.InstallExtension(e.t, map[string]string{
					base + ".control":  "comment = 'required, for the tests of the provider'\ndefault_version = '1.0'\nrelocatable = true\n",
					base + "--1.0.sql": "CREATE FUNCTION " + base + "_one() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
				})
			}
			updateTrap(e, ext, base)
			p := provision(name("uptrap"))
			e.mustCreate(p)
			if c.setup == "public" { // as an earlier provider, or the operator, made it
				e.exec(p.As, "CREATE EXTENSION "+ext+" VERSION '1.0' SCHEMA public")
			} else {
				e.exec(p.As, "CREATE EXTENSION "+base+" SCHEMA public", "CREATE SCHEMA IF NOT EXISTS extensions",
					"CREATE EXTENSION "+ext+" VERSION '1.0' SCHEMA extensions")
			}
			p.Values["extensions"] = []any{ext}
			e.mustCreate(p) // the search path set; the update not let yet
			e.plantUpper(p)
			h := e.mustHold(p)
			is.Equal(len(h.Updates), 1)
			is.True(strings.Contains(h.Updates[0].Refused, "schema public")) // refused, naming where
			p.Updates = []string{h.Updates[0].Key}
			_, _ = e.b.Create(ctx, p)

			is.Equal(e.versionOf(p.As, ext), "1.0") // never updated
			e.trapNeverRan(p)
		})
	}
}

// Creating an extension runs its script with the schemas of the extensions it requires on the
// search path too: one the consumer made in public first must not put public there.
func TestACreateNeverSearchesARequiredExtensionsSchemaTheConsumerCanWrite(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	base, ext := "novox_crbase_"+run, "novox_crtrap_"+run
	e.srv.InstallExtension(e.t, map[string]string{
		base + ".control":  "comment = 'required and trusted, for the tests of the provider'\ndefault_version = '1.0'\nrelocatable = true\ntrusted = true\nsuperuser = true\n",
		base + "--1.0.sql": "CREATE FUNCTION " + base + "_one() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
		ext + ".control":   "comment = 'calls upper() unqualified, for the tests of the provider'\ndefault_version = '1.0'\nrelocatable = true\nsuperuser = true\nrequires = '" + base + "'\n",
		ext + "--1.0.sql":  "SELECT upper('probe'::varchar);\n",
	})
	p := provision(name("crtrap"))
	e.mustCreate(p)
	e.plantUpper(p)
	conn := e.mustLogin(p.As, p.Password, p.As)
	_, err := conn.Exec(ctx, "CREATE EXTENSION "+base+" SCHEMA public") // trusted: the consumer may
	is.NoErr(err)
	p.Values["extensions"] = []any{ext}
	seen := e.foresee(p)
	_, err = e.b.Create(ctx, p)
	is.True(errors.Is(err, ports.ErrRefused))                                         // refused,
	is.Equal(seen, ports.Foresight{Act: ports.ActRefuse, Why: []string{err.Error()}}) // as the plan said, in its words
	is.True(strings.Contains(err.Error(), "in schema public"))                        // naming where
	is.True(!contains(e.extensions(p.As), ext))                                       // and not created

	e.trapNeverRan(p)
}

// An extension whose control file fixes a schema the provider does not own is never made there
// by CASCADE either: its script would run as a superuser searching, and creating in, a schema
// the consumer may have planted objects in (here public, where it planted upper()).
func TestACascadeNeverMakesARequiredExtensionWhereTheConsumerCanWrite(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	base, ext := "novox_cfbase_"+run, "novox_cftrap_"+run
	e.srv.InstallExtension(e.t, map[string]string{
		base + ".control":  "comment = 'its control file fixes public, for the tests of the provider'\ndefault_version = '1.0'\nrelocatable = false\nschema = 'public'\nsuperuser = true\n",
		base + "--1.0.sql": "SELECT upper('probe'::varchar);\n",
		ext + ".control":   "comment = 'requires one fixed in public, for the tests of the provider'\ndefault_version = '1.0'\nrelocatable = true\nsuperuser = true\nrequires = '" + base + "'\n",
		ext + "--1.0.sql":  "CREATE FUNCTION " + ext + "_one() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
	})
	p := provision(name("cftrap"))
	e.mustCreate(p)
	e.plantUpper(p)
	p.Values["extensions"] = []any{ext}
	seen := e.foresee(p)
	_, err := e.b.Create(ctx, p)
	is.True(errors.Is(err, ports.ErrRefused))                                         // refused,
	is.Equal(seen, ports.Foresight{Act: ports.ActRefuse, Why: []string{err.Error()}}) // as the plan said, in its words
	is.True(strings.Contains(err.Error(), "in schema public"))                        // naming where
	is.True(!contains(e.extensions(p.As), ext))                                       // not created,
	is.True(!contains(e.extensions(p.As), base))                                      // nor what it requires

	e.trapNeverRan(p)
}

// A hostile pin (quotes, a statement, a comment, a newline, a terminal's escape, too long) is
// refused for its consumer by Create, the check and the plan alike, with the pin quoted in the
// reason, and never reaches the server: nothing is made, nothing dropped, nothing logged.
func TestAHostilePinIsRefusedAndNeverReachesTheServer(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	victim := provision(name("victim"))
	e.mustCreate(victim)
	for _, pin := range []string{
		"1.0'; DROP ROLE " + victim.As + "; --",
		"1.0' || pg_catalog.pg_sleep(5) || '",
		`1.0\'; SELECT 1; --`,
		"1.0\nDROP ROLE " + victim.As,
		"1.0\x1b[2J\x1b]0;owned\x07",
		"1.0\u202e",
		strings.Repeat("1", 64),
		"1.0--9.9",
		"$$1.0$$",
	} {
		p := pinned(provision(name("pin")), "pg_trgm", pin)
		before := e.logSize()
		_, err := e.b.Create(ctx, p)
		is.True(errors.Is(err, ports.ErrInvalid)) // refused for that consumer, as a bad name is
		checked := e.b.HoldsAll(ctx, []ports.Provision{p}, postgres.DefaultTimeout)
		is.True(errors.Is(checked[0].Err, ports.ErrInvalid)) // the check says the same
		f := e.b.Foresee(ctx, []ports.Provision{p}, postgres.DefaultTimeout)
		is.True(f[0].Err != nil || f[0].Act == ports.ActRefuse) // and so does the plan
		for _, text := range []string{err.Error(), checked[0].Err.Error()} {
			is.True(!strings.ContainsAny(text, "\n\x1b\x07\u202e")) // the pin quoted, never raw
		}
		raw, logErr := e.srv.Local.Log()
		is.NoErr(logErr)
		is.True(!strings.Contains(string(raw[before:]), "DROP ROLE "+victim.As)) // never sent
		var roles int
		is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", p.As).Scan(&roles))
		is.Equal(roles, 0) // nothing made for it
	}
	is.True(e.holds(victim)) // nothing dropped
}

// An update waits for a lock a consumer's session holds at most the provider's lock timeout,
// and is then a transient failure, the version kept; once the lock is gone it is made.
func TestAnUpdateWaitsForAConsumersLockOnlyTheLockTimeout(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 300 * time.Millisecond})
	ext := "novox_uplock_" + run
	e.srv.InstallExtension(e.t, map[string]string{
		ext + ".control":       "comment = 'an update altering a table, for the tests of the provider'\ndefault_version = '1.1'\nrelocatable = true\n",
		ext + "--1.0.sql":      "CREATE TABLE " + ext + "_t (a int);\nGRANT SELECT ON " + ext + "_t TO PUBLIC;\n",
		ext + "--1.0--1.1.sql": "ALTER TABLE " + ext + "_t ADD COLUMN b int;\n",
	})
	p := pinned(provision(name("uplock")), ext, "1.0")
	is.NoErr(errOf(b.Create(ctx, p)))
	p = pinned(p, ext, "")
	h, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.Equal(len(h.Updates), 1)
	is.Equal(h.Updates[0].Refused, "")
	p.Updates = []string{h.Updates[0].Key}

	conn := e.mustLogin(p.As, p.Password, p.As)
	// The database's own defaults, which its owner sets, never reach the provider's sessions.
	_, err = conn.Exec(ctx, "ALTER DATABASE "+p.As+" SET lock_timeout = 0; ALTER DATABASE "+p.As+" SET search_path = public")
	is.NoErr(err)
	tx, err := conn.Begin(ctx)
	is.NoErr(err)
	_, err = tx.Exec(ctx, "SELECT * FROM extensions."+ext+"_t") // holds its lock until the transaction ends
	is.NoErr(err)
	// The consumer holds its lock until Create has returned, and has set its database's
	// lock_timeout to 0 (wait for ever): a Create that returns, cancelled by a lock timeout, waited
	// the provider's own, not for the consumer. (Not timed: under load the rest of a Create takes
	// seconds.)
	_, err = b.Create(ctx, p)
	is.True(errors.Is(err, ports.ErrTransient))                                   // a transient failure, tried again
	is.True(strings.Contains(err.Error(), ": a session holds a lock it needs (")) // lock_not_available: the provider's lock timeout ended the wait
	is.Equal(e.versionOf(p.As, ext), "1.0")                                       // the version kept
	is.NoErr(tx.Rollback(ctx))

	is.NoErr(errOf(b.Create(ctx, p)))
	is.Equal(e.versionOf(p.As, ext), "1.1") // made once the lock is gone
}

// The record the provider reads back (whose a role, a database, a renamed role is, and what is
// withdrawn) lives in roles' comments, which a consumer can neither write, on its own role or
// another's, nor move by renaming its role: nothing it does forges one.
func TestAConsumerCannotForgeARecord(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p, other := provision(name("forger")), provision(name("forged"))
	e.mustCreate(p)
	e.mustCreate(other)
	var record string
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1", other.As).Scan(&record))
	conn := e.mustLogin(p.As, p.Password, p.As)
	for _, statement := range []string{
		"COMMENT ON ROLE " + p.As + " IS " + quoteLiteral(record), // the other's record on its own role
		"COMMENT ON ROLE " + other.As + " IS NULL",                // the other's record taken off
		"ALTER ROLE " + p.As + " RENAME TO " + p.As + "_parked",   // its record moved with it
		"ALTER DATABASE " + p.As + " OWNER TO " + other.As,        // its database given to the other
	} {
		_, err := conn.Exec(ctx, statement)
		is.True(err != nil) // refused by the server
	}
	is.True(e.holds(p))     // both stand as they were
	is.True(e.holds(other)) //
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// foresee is what a plan (a read-only Backend) says of p.
func (e *env) foresee(p ports.Provision) ports.Foresight {
	e.t.Helper()
	return e.planOn(e.srv.URL).Foresee(ctx, []ports.Provision{p}, 30*time.Second)[0]
}
