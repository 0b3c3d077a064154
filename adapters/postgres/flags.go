// The PostgreSQL backend's own flags, as the daemon's command line takes them, and the Backend
// opened from them: the daemon asks them through ports.Kind and names none of them.

package postgres

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/novox/postgres-provider/adapters/postgres/archive"
	"github.com/novox/postgres-provider/ports"
)

// Flags are the PostgreSQL backend's own flags: how to reach the server and what the provider
// may do there. Flags registers them; their zero value is what it sets before parsing.
type Flags struct {
	// URL is how to reach the server (--database-url, else DATABASE_URL); empty leaves it to
	// libpq's PG* variables and defaults. It may carry a password: Secrets names it.
	URL string
	// Database is the database the provider's own sessions, lease and locks use
	// (--provider-database, DefaultDatabase).
	Database string
	// Adopt is what becomes of a role named like a consumer that this provider did not make
	// (--adopt): AdoptPlain (the default) or AdoptNone.
	Adopt Adopt
	// AllowExtensions are the only extensions consumers may have (--allow-extensions); nil
	// allows every one the server has available, empty allows none.
	AllowExtensions []string
	// AllowSettings are the only settings a consumer's entry may name (--allow-settings); nil
	// is DefaultAllowSettings, empty allows none.
	AllowSettings []string
	// ConnectionLimit is each consumer role's CONNECTION LIMIT where its entry names none
	// (--connection-limit); -1 (the default) for none, else positive.
	ConnectionLimit int
	// Archive is how a database is archived before its drop (--archive-to or
	// --archive-command, --restore-command, --pg-dump, --archive-keep); neither a folder nor
	// a command: drops are not archived. ArchiveParallel is --archive-parallel.
	Archive         archive.Config
	ArchiveParallel int
}

// DefaultArchiveKeep is --archive-keep's default.
const DefaultArchiveKeep = 30 * 24 * time.Hour

var (
	_ ports.Kind      = (*Flags)(nil)
	_ ports.FlagOrder = (*Flags)(nil)
)

// Flags registers the backend's flags on fs, each setting its field of f, which it first sets
// to the flag's default.
func (f *Flags) Flags(fs *flag.FlagSet) {
	fs.StringVar(&f.URL, "database-url", "", "how to reach the server (`URL`), as a superuser or as a role with CREATEROLE and CREATEDB (delegated mode), e.g. "+
		"postgres://provisioner@db.example:5432/postgres?sslmode=verify-full; prefer the variable, which ps does not show; "+
		"without either, DATABASE_URL, else libpq's PG* variables and defaults")
	fs.StringVar(&f.Database, "provider-database", DefaultDatabase, "the database (`DB`) the provider's own sessions, "+
		"its lease and its per-login locks use, whatever the URL names; every replica must name the same one")
	f.Adopt = AdoptPlain
	fs.Func("adopt", "a role named like a consumer that this provider did not make (`plain|none`): plain (default) takes it over where it is a plain "+
		"login role; none refuses it", func(s string) error {
		f.Adopt = Adopt(s)
		if f.Adopt != AdoptPlain && f.Adopt != AdoptNone {
			return errors.New("want plain or none")
		}
		return nil
	})
	fs.Func("allow-extensions", "the only extensions consumers may have, comma-separated (`NAME,...`; default: every one the server has available)", func(s string) error {
		f.AllowExtensions = []string{}
		for _, name := range strings.Split(s, ",") {
			if name = strings.TrimSpace(name); name != "" {
				f.AllowExtensions = append(f.AllowExtensions, name)
			}
		}
		return nil
	})
	fs.Func("allow-settings", "the only settings a consumer's entry may name (derived.settings), comma-separated (`NAME,...`; default: "+
		strings.Join(DefaultAllowSettings, ",")+"; empty: none)", func(s string) error {
		f.AllowSettings = []string{}
		for _, name := range strings.Split(s, ",") {
			if name = strings.TrimSpace(name); name != "" {
				if err := CheckAllowSetting(name); err != nil {
					return err
				}
				f.AllowSettings = append(f.AllowSettings, name)
			}
		}
		return nil
	})
	fs.StringVar(&f.Archive.Dir, "archive-to", "", "with --on-withdraw drop: a folder `DIR` where each database is archived (pg_dump --format=custom, "+
		"checked) before it is dropped; a drop waits for its archive")
	fs.StringVar(&f.Archive.Command, "archive-command", "", "with --on-withdraw drop, instead of --archive-to: a shell command `CMD` that "+
		"stores an archive from its standard input, %f its name, as PostgreSQL's archive_command; a non-zero exit holds the drop")
	fs.StringVar(&f.Archive.RestoreCommand, "restore-command", "", "for provisioner restore with --archive-command: a shell command "+
		"`CMD` that writes the archive %f to the path %p, as PostgreSQL's restore_command")
	fs.StringVar(&f.Archive.PgDump, "pg-dump", "", "the pg_dump `PATH` that archives, at least as new as the server; pg_restore is the one "+
		"beside it (default: pg_dump on PATH)")
	fs.DurationVar(&f.Archive.Keep, "archive-keep", DefaultArchiveKeep, "how long (`DURATION`) archives stay in --archive-to (0: for ever); "+
		"with --archive-command, the storage keeps them")
	fs.IntVar(&f.ArchiveParallel, "archive-parallel", 1, "how many databases (`N`) are archived at once")
	fs.IntVar(&f.ConnectionLimit, "connection-limit", -1, "each consumer role's CONNECTION LIMIT (`N`) where its entry names none (-1: no limit)")
}

// DefaultResource is the requirement a PostgreSQL provider serves unless --resource says.
func (f *Flags) DefaultResource() string { return "postgres" }

// Product names PostgreSQL on --help's first line.
func (f *Flags) Product() string { return "PostgreSQL" }

// LoginChecks: only a provider that may not read the stored verifiers checks passwords by
// logging in (powers.readsVerifiers).
func (f *Flags) LoginChecks() string { return "delegated mode" }

// FewestConnections: one for the pool and one to a consumer's database at a time.
func (f *Flags) FewestConnections() (int, string) {
	return 2, "one pooled, one to a consumer's database"
}

// Acts are what a create and an adoption do here, as the plan's legend says them.
func (f *Flags) Acts() map[ports.Act]string {
	return map[ports.Act]string{
		ports.ActCreate: "nothing of the consumer exists: its role and database are made",
		ports.ActAdopt:  "a role named like it exists that no record names, and --adopt plain takes it over\n(WHY: what that changes)",
	}
}

var _ ports.Described = (*Flags)(nil)

// FlagOrder is the order --help lists the flags in: how to reach the server, what the provider
// may do there, then how drops are archived.
func (f *Flags) FlagOrder() []string {
	return []string{"database-url", "provider-database", "adopt", "allow-extensions", "allow-settings", "connection-limit",
		"archive-to", "archive-command", "restore-command", "pg-dump", "archive-keep", "archive-parallel"}
}

// Environ takes DATABASE_URL where neither --database-url nor its variable named the server.
func (f *Flags) Environ(env map[string]string) {
	if f.URL == "" {
		f.URL = env["DATABASE_URL"]
	}
}

// Check answers what is wrong with the flags, as one line an operator acts on.
func (f *Flags) Check() error {
	switch {
	case f.Archive.Dir != "" && f.Archive.Command != "":
		return errors.New("--archive-to and --archive-command: give one of them")
	case f.Archive.Keep < 0 || f.Archive.Keep > 0 && f.Archive.Keep < time.Hour:
		return fmt.Errorf("--archive-keep %s: want 0 (for ever) or an hour or more: an archive is kept at least until its drop", f.Archive.Keep)
	case f.ArchiveParallel < 1:
		return fmt.Errorf("--archive-parallel %d: want 1 or more", f.ArchiveParallel)
	}
	if f.ConnectionLimit < -1 || f.ConnectionLimit == 0 {
		return fmt.Errorf("--connection-limit %d: want a positive number of connections, or -1 for none", f.ConnectionLimit)
	}
	return nil
}

// Secrets are the passwords the connection string carries.
func (f *Flags) Secrets() []string { return passwordsIn(f.URL) }

// Open is the Backend the flags and o name (New).
func (f *Flags) Open(o ports.Options) (ports.Server, error) {
	var archiver *archive.Archiver
	if (f.Archive.Dir != "" || f.Archive.Command != "") && !o.ReadOnly {
		a, err := archive.New(f.Archive)
		if err != nil {
			return nil, err
		}
		archiver = a
	}
	b, err := New(Config{URL: f.URL, Database: f.Database, Resource: o.Resource, Adopt: f.Adopt, Log: o.Log,
		MaxConnections: o.MaxConnections, AllowExtensions: f.AllowExtensions, AllowSettings: f.AllowSettings,
		ConnectionLimit: f.ConnectionLimit, ReadOnly: o.ReadOnly, Archive: archiver, ArchiveParallel: f.ArchiveParallel})
	if err != nil {
		return nil, err
	}
	return b, nil
}
