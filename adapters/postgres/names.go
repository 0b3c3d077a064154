// Names: what one consumer asks for (wanted), read from its entry, every name, pinned version
// and setting validated before a statement holds it.

package postgres

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/novox/postgres-provider/ports"
)

// maxIdentifier is PostgreSQL's NAMEDATALEN less one: longer names are cut short by the
// server, so two consumers could meet in one name.
const maxIdentifier = 63

// reserved are names a consumer can never be given, as a login or a database: the server's own
// and what PostgreSQL keeps for itself. The provider's own role is added per Backend.
var reserved = []string{"postgres", "public", "none", "template0", "template1",
	"current_user", "current_role", "session_user", "all"}

// wanted is what one consumer asks for, every name in it validated before any statement is built
// from it (the domain's plan, a pass's decision, is another thing).
type wanted struct {
	role       string
	database   string
	extensions []string
	// pins are the versions the entry pins, by extension; one not named here is wanted at
	// the server's default version.
	pins    map[string]string
	derived map[string]any
	// settings are derived.settings, each on the allow-list (settings.go).
	settings []setting
	// limit is the role's CONNECTION LIMIT: derived.connection_limit, else the Backend's.
	limit int
}

// entryRules are what the Backend's configuration asks of an entry: names the provider's own
// role may not take, the connection limit where the entry names none, and the settings it may
// name.
type entryRules struct {
	self            string   // the provider's own role, never given to a consumer
	limit           int      // Config.ConnectionLimit
	allowedSettings []string // Config.AllowSettings
}

// wantedOf validates what p names: the login, the database (derived.database, else values.name,
// else the login), values.extensions, derived.connection_limit and derived.settings, as
// ports.Provision reads them for every backend, with the names checked as PostgreSQL takes them.
// Its errors are of kind ports.ErrInvalid.
func (r entryRules) wantedOf(p ports.Provision) (wanted, error) {
	// Read as every backend reads it, then checked in this order: the first thing wrong is said.
	db, dbErr := p.Database()
	exts, extErr := p.Extensions()
	limit, named, limitErr := p.ConnectionLimit()
	settings, settingsErr := p.Settings()
	if err := r.checkName("login", p.As); err != nil {
		return wanted{}, invalid(err)
	}
	if dbErr != nil {
		return wanted{}, invalid(dbErr)
	}
	if err := r.checkName("database", db); err != nil {
		return wanted{}, invalid(err)
	}
	names, pins, err := extensionsOf(exts, extErr)
	if err != nil {
		return wanted{}, invalid(err)
	}
	if limitErr != nil {
		return wanted{}, invalid(limitErr)
	}
	if !named {
		limit = r.limit
	}
	set, err := r.settingsOf(settings, settingsErr)
	if err != nil {
		return wanted{}, invalid(err)
	}
	return wanted{role: p.As, database: db, extensions: names, pins: pins, derived: p.Derived, limit: limit, settings: set}, nil
}

// creatable is what Create checks of p before its first statement: every name, and a password.
// Its errors are of kind ports.ErrInvalid.
func (r entryRules) creatable(p ports.Provision) (wanted, error) {
	w, err := r.wantedOf(p)
	if err != nil {
		return wanted{}, err
	}
	if p.Password == "" {
		return wanted{}, invalid(atRole(w.role, errors.New("the minted password is empty")))
	}
	return w, nil
}

// databaseOf names the consumer's database as ports.Provision.Database does, for a record
// that holds only what was derived.
func databaseOf(as string, values, derived map[string]any) (string, error) {
	return ports.Provision{As: as, Values: values, Derived: derived}.Database()
}

// checkName refuses a login or database name that is empty, too long, holds anything but
// letters, digits, '_' and '-', or is one PostgreSQL or this provider keeps for itself.
func (r entryRules) checkName(what, name string) error {
	if err := checkIdentifier(what, name); err != nil {
		return err
	}
	lower := strings.ToLower(name)
	if strings.HasPrefix(lower, "pg_") {
		return fmt.Errorf("%s %q: names starting with pg_ are reserved", what, name)
	}
	if slices.Contains(reserved, lower) || (r.self != "" && lower == strings.ToLower(r.self)) {
		return fmt.Errorf("%s %q: the name is reserved", what, name)
	}
	return nil
}

// checkExtension refuses an extension name that could not be one of the server's: extension
// names are file names in the server's extension folder (pg_trgm, uuid-ossp, vector).
func checkExtension(name string) error {
	return checkIdentifier("extension", name)
}

func checkIdentifier(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty", what)
	case len(name) > maxIdentifier:
		return fmt.Errorf("%s %q: %d bytes, at most %d", what, name, len(name), maxIdentifier)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("%s %q: only letters, digits, _ and - are allowed, not %q", what, name, r)
		}
	}
	return nil
}

// extensionsOf checks values.extensions as ports.Provision.Extensions read it (exts, and err
// where it failed), each name and pinned version as PostgreSQL takes them, in the entries'
// order: the names wanted, and the versions pinned by name (one not named there is wanted at
// the server's default version).
func extensionsOf(exts []ports.Extension, err error) (names []string, pins map[string]string, _ error) {
	for _, e := range exts { // those read before what err is about, and it: their names come first
		if err := checkExtension(e.Name); err != nil {
			return nil, nil, err
		}
		if e.Pinned {
			if err := checkVersion(e.Name, e.Version); err != nil {
				return nil, nil, err
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if exts == nil {
		return nil, nil, nil
	}
	names = make([]string, 0, len(exts))
	for _, e := range exts {
		names = append(names, e.Name)
		if e.Version != "" {
			if pins == nil {
				pins = map[string]string{}
			}
			pins[e.Name] = e.Version
		}
	}
	return names, pins, nil
}

// checkVersion refuses a pinned version that cannot name one of the server's: versions are
// parts of script file names (vector--0.8.0--0.8.6.sql), so letters, digits, '.', '_' and '-'.
func checkVersion(name, version string) error {
	switch {
	case version == "":
		return fmt.Errorf("values.extensions: extension %s: version is empty (name it as a plain string for the server's default)", name)
	case len(version) > maxIdentifier:
		return fmt.Errorf("values.extensions: extension %s: version of %d bytes, at most %d", name, len(version), maxIdentifier)
	case strings.Contains(version, "--"):
		return fmt.Errorf("values.extensions: extension %s: version %q holds --, which no version can", name, version)
	}
	for _, r := range version {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("values.extensions: extension %s: version %q: only letters, digits, ., _ and - are allowed, not %q", name, version, r)
		}
	}
	return nil
}

// settingName is what a setting's name must look like: PostgreSQL's own parameters, lower case.
// It keeps out every custom (dotted) parameter and anything that would need quoting.
var settingName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// CheckAllowSetting refuses a name --allow-settings may never hold: one that is not a
// parameter's name, one the provider sets itself (search_path), or one that loads code, reaches
// the server's log or files, or changes who a session is (session_preload_libraries, log_*,
// role, ...). The server is asked the rest when a consumer names it (writeSettings).
func CheckAllowSetting(name string) error {
	if !settingName.MatchString(name) {
		return fmt.Errorf("setting %q: not a parameter's name (lower-case letters, digits and _)", name)
	}
	for _, never := range []string{"search_path", "role", "session_authorization", "session_replication_role",
		"session_preload_libraries", "local_preload_libraries", "shared_preload_libraries", "dynamic_library_path",
		"jit_provider", "zero_damaged_pages", "allow_system_table_mods", "lc_messages", "default_tablespace",
		"temp_tablespaces"} {
		if name == never {
			return fmt.Errorf("setting %s: never set for a consumer (it is the provider's, or only a superuser may set it)", name)
		}
	}
	for _, prefix := range []string{"log_", "debug_", "trace_", "ignore_", "wal_"} {
		if strings.HasPrefix(name, prefix) {
			return fmt.Errorf("setting %s: never set for a consumer (%s* settings are a superuser's)", name, prefix)
		}
	}
	return nil
}

// setting is one of a consumer's settings: its value as the server stores it ("30s"), or none
// where derived.settings names it null, which resets it.
type setting struct {
	name  string
	value *string
}

// settingsOf checks derived.settings as ports.Provision.Settings read it (read, and err where it
// failed), each name against what is never set and the allow-list. Its errors say which name
// and why.
func (r entryRules) settingsOf(read []ports.Setting, err error) ([]setting, error) {
	out := make([]setting, 0, len(read))
	for _, s := range read { // those read before what err is about, and it: their names come first
		if err := CheckAllowSetting(s.Name); err != nil {
			return nil, fmt.Errorf("derived.settings: %w", err)
		}
		if !slices.Contains(r.allowedSettings, s.Name) {
			return nil, fmt.Errorf("derived.settings: setting %s is not allowed on this server (--allow-settings)", s.Name)
		}
		out = append(out, setting{name: s.Name, value: s.Value})
	}
	if err != nil {
		return nil, err
	}
	if read == nil {
		return nil, nil
	}
	return out, nil
}
