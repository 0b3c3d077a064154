// Restore: a dropped consumer's database made again from the archive its drop left.

package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/adapters/postgres/archive"
	"github.com/novox/postgres-provider/ports"
)

var _ ports.Archiving = (*Backend)(nil)

// archived is one archive as the archives' record holds it.
type archived struct {
	name, database, sha256 string
	size                   int64
	made                   time.Time
	record                 record
}

// Restore makes the database of the dropped consumer as again from its last archive (or from,
// a copy of one the record knows): the role and its database as Create makes them (its
// extensions in the provider's schema, its settings), withdrawn; then the archive restored into
// it as the role, without what the provider makes itself (its schema and extensions). The
// archive's SHA-256 is checked against the record before anything is made.
func (b *Backend) Restore(ctx context.Context, as, from string) (string, error) {
	if b.archives == nil {
		return "", errors.New("no archives: give --archive-to, or --archive-command and --restore-command, as the daemon has them")
	}
	if err := b.rules.checkName("login", as); err != nil {
		return "", err
	}
	a, path, done, err := b.archiveToRestore(ctx, as, from)
	if err != nil {
		return "", err
	}
	defer done()
	if err := b.restorable(ctx, as, a); err != nil {
		return "", err
	}
	toc, err := b.archives.to.List(ctx, path)
	if err != nil {
		return "", err
	}
	exts := extensionsIn(toc)
	// The database by the name the record keeps, whether derived named it or the consumer's values did.
	p := ports.Provision{As: as, Password: throwaway(), Derived: a.record.Derived, Values: map[string]any{"name": a.database}}
	if len(exts) > 0 {
		names := make([]any, len(exts))
		for i, x := range exts {
			names[i] = x
		}
		p.Values["extensions"] = names
	}
	if db, err := p.Database(); err != nil || db != a.database {
		return "", fmt.Errorf("archive %s: its record names database %s, which what was derived (%v) does not; not restored", a.name, a.database, a.record.Derived)
	}
	// Made as Create makes it, then withdrawn at once: the login is the mesh's to give back.
	_, err = b.Create(ctx, p)
	if incomplete := (*ports.Incomplete)(nil); errors.As(err, &incomplete) {
		err = fmt.Errorf("%w (install them on the server, then restore again)", err)
	}
	if err != nil {
		return "", fmt.Errorf("make %s and its database %s: %w", as, a.database, err)
	}
	if err := b.Remove(ctx, as); err != nil {
		return "", err
	}
	keep := func(line string) bool { return !providersOwn(line) }
	if err := b.archives.to.Restore(ctx, b.dumpSource(a.database, as), path, toc, keep); err != nil {
		return "", fmt.Errorf("restore %s into %s: %w; the database was made, and is empty: drop it (DROP DATABASE %s) before restoring again",
			a.name, a.database, err, ident(a.database))
	}
	return fmt.Sprintf("%s: restored database %s from %s (%s, sha256 %s, made %s); its login stays withdrawn until the mesh lists it again",
		as, a.database, b.archives.to.Where(a.name), bytesText(a.size), a.sha256, a.made.UTC().Format(time.RFC3339)), nil
}

// archiveToRestore is the archive to restore and a local path of it whose checksum is the
// record's: the last recorded of as, or the one whose SHA-256 from has.
func (b *Backend) archiveToRestore(ctx context.Context, as, from string) (archived, string, func(), error) {
	sum := ""
	if from != "" {
		var err error
		if sum, err = archive.Sum(from); err != nil {
			return archived{}, "", nil, fmt.Errorf("--from: %w", err)
		}
	}
	var (
		a   archived
		doc []byte
	)
	err := b.pool.QueryRow(ctx, `SELECT name, database, sha256, size, made_at, record FROM `+archiveTable+`
	    WHERE resource = $1 AND login = $2 AND ($3 = '' AND deleted_at IS NULL OR sha256 = $3) ORDER BY made_at DESC LIMIT 1`,
		b.resource, as, sum).Scan(&a.name, &a.database, &a.sha256, &a.size, &a.made, &doc)
	switch {
	case errors.Is(err, pgx.ErrNoRows) && from != "":
		return archived{}, "", nil, fmt.Errorf("%s is not an archive of %s that %s records (its sha256 %s is none of theirs); not restored", from, as, archiveTable, sum)
	case errors.Is(err, pgx.ErrNoRows):
		return archived{}, "", nil, fmt.Errorf("no archive of %s is recorded in %s (nor kept: --archive-keep)", as, archiveTable)
	case err != nil && strings.Contains(err.Error(), "does not exist"):
		return archived{}, "", nil, fmt.Errorf("no archive is recorded on this server (%s in %s does not exist)", archiveTable, b.home)
	case err != nil:
		return archived{}, "", nil, fmt.Errorf("read the archives' record: %w", err)
	}
	if err := json.Unmarshal(doc, &a.record); err != nil {
		return archived{}, "", nil, fmt.Errorf("archive %s: its record cannot be read: %w", a.name, err)
	}
	if from != "" {
		return a, from, func() {}, nil
	}
	path, done, err := b.archives.to.Fetch(ctx, a.name, a.sha256)
	if err != nil {
		return archived{}, "", nil, err
	}
	return a, path, done, nil
}

// restorable refuses a restore where the consumer is active, its role not the provider's, or
// its database exists.
func (b *Backend) restorable(ctx context.Context, as string, a archived) error {
	var (
		role    bool
		comment *string
		db      bool
	)
	err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = $1),
	    (SELECT pg_catalog.shobj_description(oid, 'pg_authid') FROM pg_catalog.pg_roles WHERE rolname = $1),
	    EXISTS (SELECT FROM pg_catalog.pg_database WHERE datname = $2)`, as, a.database).Scan(&role, &comment, &db)
	if err != nil {
		return fmt.Errorf("look at %s: %w", as, err)
	}
	if role {
		r, ok := parseRecord(comment)
		switch {
		case !ok || r.Resource != b.resource:
			return refused(fmt.Errorf("role %s exists and is not a consumer of this provider; not restored", as))
		case r.State == active:
			return refused(fmt.Errorf("%s is active: restore brings back a consumer that was dropped; unlist it and let it be withdrawn first", as))
		}
	}
	if db {
		return refused(fmt.Errorf("database %s exists: restore makes it anew from its archive; drop or rename it first", a.database))
	}
	return nil
}

// providersOwn is whether a line of pg_restore's list is what the provider makes itself, not
// the consumer: an extension, and the schema it puts extensions in.
func providersOwn(line string) bool {
	for _, own := range []string{" EXTENSION - ", " COMMENT - EXTENSION ", " SCHEMA - " + extensionSchema + " ", " ACL - SCHEMA " + extensionSchema + " ",
		" COMMENT - SCHEMA " + extensionSchema + " "} {
		if strings.Contains(line+" ", own) {
			return true
		}
	}
	return false
}

// extensionsIn are the extensions an archive's list names (its "EXTENSION - name" entries), but
// plpgsql, which every database has.
func extensionsIn(toc []string) []string {
	var out []string
	for _, line := range toc {
		if _, rest, ok := strings.Cut(line, " EXTENSION - "); ok && !strings.HasPrefix(line, ";") {
			if f := strings.Fields(rest); len(f) > 0 && f[0] != "plpgsql" {
				out = append(out, f[0])
			}
		}
	}
	return out
}

// throwaway is a password nobody knows, for the moment a restored login exists before it is
// withdrawn.
func throwaway() string {
	buf := make([]byte, 24)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}
