package pgserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Folders are where an extension of a server goes, found from the server's own binaries, never
// from a distribution's layout: Debian's server and the pinned ones of make test PG=<major>
// alike.
type Folders struct {
	// Extension holds the extensions' control files and scripts (SHAREDIR/extension).
	Extension string
	// Lib holds the extensions' libraries (PKGLIBDIR).
	Lib string
	// PGXS is the build system's makefile; "" where the server has no pg_config, and so no
	// headers to build an extension with.
	PGXS string
	// PGConfig is the server's pg_config, "" where it has none.
	PGConfig string
	// Major is the server's major version ("18").
	Major string
}

// Folders finds where the server's extensions go: its pg_config says where there is one beside
// its binaries; else they are where the server itself looks, relative to its binaries (a
// relocatable build such as the npm one: ../share/postgresql/extension and ../lib/postgresql,
// or ../share/extension and ../lib).
func (s *Server) Folders() (Folders, error) { return folders(s.Bin) }

func folders(bin string) (Folders, error) {
	var f Folders
	out, err := RunGroup(exec.Command(filepath.Join(bin, "postgres"), "--version"), time.Minute)
	if err != nil {
		return f, err
	}
	// postgres (PostgreSQL) 15.8 (Debian 15.8-0+deb12u1), postgres (PostgreSQL) 18.4
	fields := strings.Fields(string(out))
	if len(fields) < 3 {
		return f, fmt.Errorf("%s --version said %q", filepath.Join(bin, "postgres"), out)
	}
	f.Major, _, _ = strings.Cut(fields[2], ".")

	if pgConfig := filepath.Join(bin, "pg_config"); exists(pgConfig) {
		out, err := RunGroup(exec.Command(pgConfig, "--sharedir", "--pkglibdir", "--pgxs"), time.Minute)
		if err != nil {
			return f, err
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 3 {
			return f, fmt.Errorf("pg_config said %q", out)
		}
		f.Extension, f.Lib, f.PGXS, f.PGConfig = filepath.Join(lines[0], "extension"), lines[1], lines[2], pgConfig
		return f, nil
	}
	for _, c := range []struct{ ext, lib string }{
		{"../share/postgresql/extension", "../lib/postgresql"},
		{"../share/extension", "../lib"},
	} {
		ext := filepath.Join(bin, c.ext)
		if exists(filepath.Join(ext, "plpgsql.control")) {
			f.Extension, f.Lib = ext, filepath.Join(bin, c.lib)
			return f, nil
		}
	}
	return f, errors.New("the server in " + bin + " has no pg_config, and no extension folder beside its binaries " +
		"(../share/postgresql/extension or ../share/extension with plpgsql.control)")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
