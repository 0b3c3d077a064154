// Names: what one consumer asks for (wanted), every name validated before a statement holds it.

package postgres

import (
	"fmt"
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

// wantedOf validates what p names: the login, the database (derived.database, else values.name,
// else the login), values.extensions, derived.connection_limit and derived.settings, as
// ports.Provision reads them for every backend, with the names checked as PostgreSQL takes them.
// Its errors are of kind ports.ErrInvalid.
func (b *Backend) wantedOf(p ports.Provision) (wanted, error) {
	if err := b.checkName("login", p.As); err != nil {
		return wanted{}, invalid(err)
	}
	db, err := p.Database()
	if err != nil {
		return wanted{}, invalid(err)
	}
	if err := b.checkName("database", db); err != nil {
		return wanted{}, invalid(err)
	}
	exts, pins, err := extensionsOf(p.Values)
	if err != nil {
		return wanted{}, invalid(err)
	}
	limit, named, err := p.ConnectionLimit()
	if err != nil {
		return wanted{}, invalid(err)
	}
	if !named {
		limit = b.limit
	}
	settings, err := b.settingsOf(p)
	if err != nil {
		return wanted{}, invalid(err)
	}
	return wanted{role: p.As, database: db, extensions: exts, pins: pins, derived: p.Derived, limit: limit, settings: settings}, nil
}

// databaseOf names the consumer's database as ports.Provision.Database does, for a record
// that holds only what was derived.
func databaseOf(as string, values, derived map[string]any) (string, error) {
	return ports.Provision{As: as, Values: values, Derived: derived}.Database()
}

// checkName refuses a login or database name that is empty, too long, holds anything but
// letters, digits, '_' and '-', or is one PostgreSQL or this provider keeps for itself.
func (b *Backend) checkName(what, name string) error {
	if err := checkIdentifier(what, name); err != nil {
		return err
	}
	lower := strings.ToLower(name)
	if strings.HasPrefix(lower, "pg_") {
		return fmt.Errorf("%s %q: names starting with pg_ are reserved", what, name)
	}
	if slices.Contains(reserved, lower) || (b.self != "" && lower == strings.ToLower(b.self)) {
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
