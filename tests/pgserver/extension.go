package pgserver

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// InstallExtension writes files (name: content) into the extension folder of the server these
// tests started, each by rename and the control files last, so that a server reading the folder
// meanwhile (another test's, another test binary's) never sees half a file, nor a control file
// without its scripts. It skips t where the server is not one these tests started, or its
// extension folder cannot be written.
func (ts *TestServer) InstallExtension(t testing.TB, files map[string]string) {
	t.Helper()
	if ts.Local == nil {
		t.Skip("installing a test extension needs a server these tests started")
	}
	f, err := ts.Local.Folders()
	if err != nil {
		t.Fatalf("the server's extension folder, found from its binaries: %v", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return controlLast(names[i], names[j]) })
	for _, name := range names {
		written, err := place(filepath.Join(f.Extension, name), []byte(files[name]), 0o644)
		if !written {
			t.Skipf("the extension folder %s cannot be written: %v", f.Extension, err)
		}
		if err != nil {
			t.Fatalf("install %s: %v", name, err)
		}
	}
}

// ThreeVersions are the files of an extension ext with versions 1.0, 1.1 and 1.2 (the default),
// whose 1.1 -> 1.2 script fails (division by zero) where broken: for the tests of updates and
// their rollout.
func ThreeVersions(ext string, broken bool) map[string]string {
	step := "CREATE FUNCTION " + ext + "_two() RETURNS int LANGUAGE sql AS 'SELECT 2';\n"
	if broken {
		step += "SELECT 1/0;\n"
	}
	return map[string]string{
		ext + ".control":       "comment = 'three versions, for the tests of the provider'\ndefault_version = '1.2'\nrelocatable = true\n",
		ext + "--1.0.sql":      "CREATE FUNCTION " + ext + "_zero() RETURNS int LANGUAGE sql AS 'SELECT 0';\n",
		ext + "--1.0--1.1.sql": "CREATE FUNCTION " + ext + "_one() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
		ext + "--1.1--1.2.sql": step,
	}
}

// controlLast orders an extension's files for installing: whether a goes before b, scripts
// first (by name) and control files last, as a server finds an extension by its control file.
func controlLast(a, b string) bool {
	ac, bc := strings.HasSuffix(a, ".control"), strings.HasSuffix(b, ".control")
	if ac != bc {
		return bc
	}
	return a < b
}

// place writes content to path by rename: written beside it first, so that a reader of the
// folder sees the old file or the new one, whole. written is whether the content reached the
// folder at all (false: the folder cannot be written); an error with written true is the
// rename's.
func place(path string, content []byte, perm os.FileMode) (written bool, err error) {
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".%s.%d", filepath.Base(path), os.Getpid()))
	if err := os.WriteFile(tmp, content, perm); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return true, err
	}
	return true, nil
}
