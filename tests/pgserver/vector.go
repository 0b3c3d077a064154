package pgserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// vectorControl and vectorScript are a stand-in for pgvector where the real one is absent: an
// untrusted extension named vector that defines a type vector, which is what consumers fail on.
const (
	vectorControl = `# A stand-in for pgvector, installed by the novox PostgreSQL provider's tests and make run
# where the real extension is absent. Installing the real pgvector replaces it.
comment = 'stand-in for pgvector: a vector type'
default_version = '0.0.1'
relocatable = true
trusted = false
superuser = true
`
	vectorScript = `\echo Use "CREATE EXTENSION vector" to load this file. \quit
CREATE DOMAIN vector AS real[];
`
)

// EnsureVector makes an extension named vector available on this server: the real one if it is
// installed, else the stand-in, written into the server's extension folder where that can be
// written. It answers whether vector is available.
func (s *Server) EnsureVector() (bool, error) {
	pgConfig := filepath.Join(s.Bin, "pg_config")
	if _, err := os.Stat(pgConfig); err != nil {
		pgConfig = "pg_config"
	}
	out, err := exec.Command(pgConfig, "--sharedir").Output()
	if err != nil {
		return false, fmt.Errorf("pg_config --sharedir: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "extension")
	if _, err := os.Stat(filepath.Join(dir, "vector.control")); err == nil {
		return true, nil
	}
	// The script first and the control file last, each by rename, so that a server looking
	// at the folder meanwhile (another test binary's) never reads half a file.
	for _, f := range []struct{ name, content string }{{"vector--0.0.1.sql", vectorScript}, {"vector.control", vectorControl}} {
		tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d", f.name, os.Getpid()))
		if err := os.WriteFile(tmp, []byte(f.content), 0o644); err != nil {
			return false, fmt.Errorf("the extension folder %s cannot be written: %w", dir, err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.name)); err != nil {
			_ = os.Remove(tmp)
			return false, fmt.Errorf("install %s: %w", f.name, err)
		}
	}
	return true, nil
}
