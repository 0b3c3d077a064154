// The provider's sessions' known state: the startup parameters that win over a consumer's settings.

package postgres

// A consumer owns its database, and may set defaults for every session there (ALTER DATABASE
// own SET role = ..., search_path, statement_timeout, default_transaction_read_only, ...). The
// server applies those after the client's startup parameters only where the client named none:
// a startup parameter wins over a database's or a role's setting. So every session the provider
// opens names, as startup parameters, every setting that would change what its statements do or
// whom they run as, and none of a consumer's applies to it.

// DefaultDatabase is Config.Database's default: the database the provider's own sessions, its
// lease and its per-login locks use, whatever the URL names.
const DefaultDatabase = "postgres"

// knownState sets, in params, the settings every session of the provider starts with. user is
// the provider's role (session_authorization), lockTimeout the statements' lock_timeout. Whom
// the statements run as, what a name resolves to, how a string constant reads and how long a
// lock is waited for are always the provider's; the others only where the connection URL
// names none (an operator's choice, such as default_transaction_read_only=on, stands: a
// consumer cannot write the URL).
func knownState(params map[string]string, user, lockTimeout string) {
	for k, v := range map[string]string{
		// Whom the statements run as: the provider's role itself, not one a consumer named.
		"role":                  "none",
		"session_authorization": user,
		// What a name resolves to: the catalog only (pg_temp, the session's own, last).
		"search_path":  "pg_catalog, pg_temp",
		"lock_timeout": lockTimeout,
		// literal() doubles quotes only, which is right only while this is on: a backslash in a
		// consumer's text (a prepared transaction's name) must stay a backslash.
		"standard_conforming_strings": "on",
	} {
		params[k] = v
	}
	if user == "" { // no user named: the server's default applies, and is the session's own
		delete(params, "session_authorization")
	}
	for k, v := range map[string]string{
		// What a statement may take, and what it may do.
		"statement_timeout":                   "0",
		"idle_in_transaction_session_timeout": "0",
		"default_transaction_read_only":       "off",
		"default_transaction_isolation":       "read committed",
		"default_transaction_deferrable":      "off",
		"check_function_bodies":               "on",
		// Where what the provider creates goes: the database's default tablespace.
		"default_tablespace": "",
		"temp_tablespaces":   "",
		// A library a consumer names that does not load would refuse every connection.
		"local_preload_libraries": "",
		"row_security":            "on",
		// The catalog's recursive membership walks are estimated at millions of rows where a
		// server holds many grants of one role (the provider's own, in delegated mode) and they
		// find none: over jit_above_cost, each plan made anew (the first few in every new
		// session) was compiled for up to a second of the server's CPU, for a query that runs
		// in milliseconds.
		"jit": "off",
	} {
		if _, named := params[k]; !named {
			params[k] = v
		}
	}
}

// sinceVersion sets, in params, the settings of knownState that a server of major version major
// has and one of an older version would refuse as unknown startup parameters. major 0 (not
// known yet) sets none.
func sinceVersion(params map[string]string, major int) {
	for k, since := range map[string]int{"idle_session_timeout": 14, "transaction_timeout": 17} {
		if _, named := params[k]; !named && major >= since {
			params[k] = "0"
		}
	}
}
