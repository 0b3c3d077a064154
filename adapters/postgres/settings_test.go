package postgres_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
)

// withSettings is p with derived.settings s.
func withSettings(p ports.Provision, s map[string]any) ports.Provision {
	p.Derived = map[string]any{"settings": s}
	return p
}

// setconfig is the role's settings in its database, as the server holds them.
func (e *env) setconfig(role, db string) []string {
	e.t.Helper()
	var out []string
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, `SELECT coalesce((SELECT s.setconfig FROM pg_db_role_setting s
JOIN pg_roles r ON r.oid = s.setrole JOIN pg_database d ON d.oid = s.setdatabase WHERE r.rolname = $1 AND d.datname = $2), '{}')`,
		role, db).Scan(&out))
	slices.Sort(out)
	return out
}

func TestSettingsAreTheRolesInItsDatabaseAndHeld(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := withSettings(provision(name("set"), "pg_trgm"), map[string]any{"statement_timeout": "30s",
		"idle_in_transaction_session_timeout": "5min", "work_mem": float64(8192)})
	is.NoErr(errOf(e.b.Create(ctx, p)))
	is.Equal(e.setconfig(p.As, p.As), []string{"idle_in_transaction_session_timeout=5min",
		`search_path="$user", public, extensions`, "statement_timeout=30s", "work_mem=8192"}) // the provider's search_path kept beside them
	is.True(e.holds(p)) // held as asked

	conn := e.mustLogin(p.As, p.Password, p.As)
	var timeout string
	is.NoErr(conn.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout))
	is.Equal(timeout, "30s") // a session of the consumer has it

	// The consumer changes one for itself, and sets one the provider does not manage.
	_, err := conn.Exec(ctx, "ALTER ROLE "+p.As+" IN DATABASE "+p.As+" SET statement_timeout = 0")
	is.NoErr(err)
	_, err = conn.Exec(ctx, "ALTER ROLE "+p.As+" IN DATABASE "+p.As+" SET DateStyle = 'German'")
	is.NoErr(err)
	held, err := holdsOne(ctx, e.b, p)
	is.NoErr(err)
	is.Equal(held.Drift, []string{"setting statement_timeout"}) // the drift named, in the batched check
	is.Equal(errOf(e.b.Create(ctx, p)), nil)
	is.True(e.holds(p))                                                        // repaired
	is.True(slices.Contains(e.setconfig(p.As, p.As), "statement_timeout=30s")) // as asked
	is.True(slices.Contains(e.setconfig(p.As, p.As), "DateStyle=German"))      // what it set outside the list left alone

	// A foresight says the same drift.
	e.exec("", "ALTER ROLE "+p.As+" IN DATABASE "+p.As+" RESET work_mem")
	f := e.b.Foresee(ctx, []ports.Provision{p}, postgres.DefaultTimeout)
	is.NoErr(f[0].Err)
	is.Equal(f[0].Act, ports.ActRepair)
	is.Equal(f[0].Why, []string{"setting work_mem"})

	// null resets one.
	p = withSettings(p, map[string]any{"statement_timeout": nil})
	is.True(!e.holds(p))
	is.NoErr(errOf(e.b.Create(ctx, p)))
	is.True(!slices.ContainsFunc(e.setconfig(p.As, p.As), func(s string) bool { return strings.HasPrefix(s, "statement_timeout=") }))
	is.True(e.holds(p))
}

func TestSettingsRefusesWhatIsNotAllowedWithTheReason(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		settings map[string]any
		reason   string
	}{
		{map[string]any{"session_preload_libraries": "auto_explain"}, "setting session_preload_libraries: never set for a consumer"},
		{map[string]any{"log_statement": "none"}, "setting log_statement: never set for a consumer"},
		{map[string]any{"search_path": "public"}, "setting search_path: never set for a consumer"},
		{map[string]any{"DateStyle": "German"}, "not a parameter's name"},
		{map[string]any{"statement_timeout; DROP DATABASE postgres": "1"}, "not a parameter's name"},
		{map[string]any{"enable_seqscan": "off"}, "setting enable_seqscan is not allowed on this server (--allow-settings)"},
		{map[string]any{"work_mem": "1\n2"}, "holds a control character"},
		{map[string]any{"work_mem": []any{"1"}}, "not a string, number, true/false or null"},
		{nil, "not an object of settings"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			is := is.New(t)
			p := provision(name("refset"))
			p.Derived = map[string]any{"settings": any(c.settings)}
			if c.settings == nil {
				p.Derived = map[string]any{"settings": "x"}
			}
			act, err := e.b.Create(ctx, p)
			is.Equal(act, ports.ActRefuse)
			is.True(errors.Is(err, ports.ErrInvalid))        // the consumer's entry, not the server
			is.True(strings.Contains(err.Error(), c.reason)) // with the reason
			is.True(!strings.Contains(e.catalog(), p.As))    // nothing made
		})
	}
}

func TestSettingsValuesCannotInject(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	for _, hostile := range []string{`30s'; DROP ROLE postgres; --`, `1\'; SELECT 1; --`, `'`, `\`, `$$; $$`, "30s' || '"} {
		p := withSettings(provision(name("inj")), map[string]any{"statement_timeout": hostile})
		_, err := e.b.Create(ctx, p)
		is.True(errors.Is(err, ports.ErrInvalid))                                          // the server's own refusal of the value, as the entry's
		is.True(strings.Contains(err.Error(), "setting statement_timeout: invalid value")) // said as the server says it
	}
	// A value of a text setting is stored as given, quotes and backslashes and all.
	b := e.backendWith(postgres.Config{URL: e.srv.URL, AllowSettings: []string{"application_name"}})
	odd := `it's a \ value; --`
	p := withSettings(provision(name("inj")), map[string]any{"application_name": odd})
	is.NoErr(errOf(b.Create(ctx, p)))
	is.True(slices.Contains(e.setconfig(p.As, p.As), "application_name="+odd)) // the value exactly, nothing run
	held, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.True(held.Held)
}

// A value the server rejects is refused before anything is made, and a plan foresees the
// refusal in the create's words (issue 39, case 2).
func TestARejectedValueIsRefusedFirstAndForeseen(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := withSettings(provision(name("rej")), map[string]any{"work_mem": "64MB", "statement_timeout": "soon"})
	seen := e.b.Foresee(ctx, []ports.Provision{p}, time.Minute)
	_, err := e.b.Create(ctx, p)
	is.True(errors.Is(err, ports.ErrInvalid))
	is.Equal(err.Error(), "settings of "+p.As+" in "+p.As+`: setting statement_timeout: invalid value for parameter "statement_timeout": "soon"`)
	is.True(!strings.Contains(e.catalog(), p.As)) // nothing made
	is.NoErr(seen[0].Err)
	is.Equal(seen[0].Act, ports.ActRefuse)
	is.Equal(seen[0].Why, []string{err.Error()}) // the plan's words are the create's
}

func TestAllowSettingsRefusesWhatOnlyASuperuserMaySet(t *testing.T) {
	is := is.New(t)
	for _, name := range []string{"session_preload_libraries", "log_min_duration_statement", "search_path", "role", "Work_Mem", ""} {
		_, err := postgres.New(postgres.Config{URL: "postgres://x@127.0.0.1:1/x", AllowSettings: []string{name}})
		is.True(err != nil) // refused at the start
	}
	_, err := postgres.New(postgres.Config{URL: "postgres://x@127.0.0.1:1/x", AllowSettings: []string{"work_mem", "geqo"}})
	is.NoErr(err)
}

func TestSettingsTheServerWillNotGiveAConsumerAreRefused(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	// Allowed by the operator, but the server says a consumer's role cannot have it.
	b := e.backendWith(postgres.Config{URL: e.srv.URL, AllowSettings: []string{"max_connections", "no_such_setting"}})
	p := withSettings(provision(name("ctx")), map[string]any{"max_connections": "10"})
	_, err := b.Create(ctx, p)
	is.True(errors.Is(err, ports.ErrInvalid))
	is.True(strings.Contains(err.Error(), "setting max_connections: a consumer's role cannot have it (its context is postmaster)"))
	p = withSettings(provision(name("ctx")), map[string]any{"no_such_setting": "1"})
	_, err = b.Create(ctx, p)
	is.True(strings.Contains(err.Error(), "setting no_such_setting: not a parameter this server knows"))
}

// A provider that is not a superuser may not set a bound only a superuser may (temp_file_limit):
// refused, naming the grant that lets it, rather than failing every pass; the rest are set.
func TestADelegatedProviderIsRefusedASuperusersSettingNamingTheGrant(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b, prov := e.delegated()
	p := withSettings(provision(name("dset")), map[string]any{"statement_timeout": "30s"})
	is.NoErr(errOf(b.Create(ctx, p))) // a consumer's own setting: set
	is.Equal(e.setconfig(p.As, p.As), []string{"statement_timeout=30s"})

	p = withSettings(p, map[string]any{"statement_timeout": "30s", "temp_file_limit": "1GB"})
	err := errOf(b.Create(ctx, p))
	is.True(errors.Is(err, ports.ErrRefused)) // refused: backed off, not tried every pass
	is.True(strings.Contains(err.Error(), "setting temp_file_limit: the provider may not set it"))
	is.True(strings.Contains(err.Error(), "GRANT SET ON PARAMETER temp_file_limit"))
	is.True(!slices.Contains(e.setconfig(p.As, p.As), "temp_file_limit=1GB"))

	if e.major() >= 15 { // the grant the line names lets it
		e.exec("", "GRANT SET ON PARAMETER temp_file_limit TO "+prov)
		is.NoErr(errOf(b.Create(ctx, p)))
		is.True(slices.Contains(e.setconfig(p.As, p.As), "temp_file_limit=1GB"))
	}
}
