package pgserver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The extension named vector that letta asks for: pgvector where the server has it, or where
// its source is beside the project (../shared/third_party/ from the project's root) and this
// machine can build it; else a stand-in that defines only the type, which is what consumers
// fail on. A fresh clone elsewhere has no such folder, and gets the stand-in.

// Vector is the extension named vector a server has, as EnsureVector found or made it.
type Vector struct {
	// Real is whether it is pgvector; false: the stand-in.
	Real bool
	// Why says why the stand-in is used: what kept pgvector from being had.
	Why string
}

// String says which one it is, and why the stand-in.
func (v Vector) String() string {
	if v.Real {
		return "pgvector"
	}
	return "the stand-in for pgvector (a type only: " + v.Why + ")"
}

const (
	// pgvectorTarball is pgvector 0.8.6's source (see ../shared/third_party/README.md), and
	// pgvectorSHA256 its digest: it is built and installed as root, so nothing else is.
	pgvectorTarball = "pgvector-0.8.6.tar.gz"
	pgvectorSHA256  = "5743dac39fdfa740533cf95e71b033bd5513b71dda194b3cf19464ccbf76f3fb"

	// standInMark is in the stand-in's comment, which tells it from pgvector on a machine
	// where an earlier run installed it.
	standInMark = "stand-in for pgvector"
)

// vectorControl and vectorScript are the stand-in: an untrusted extension named vector that
// defines a type vector.
const (
	vectorControl = `# A stand-in for pgvector, installed by the novox PostgreSQL provider's tests and make run
# where the real extension is absent. Installing the real pgvector replaces it.
comment = '` + standInMark + `: a vector type'
default_version = '0.0.1'
relocatable = true
trusted = false
superuser = true
`
	vectorScriptName = "vector--0.0.1.sql"
	vectorScript     = `\echo Use "CREATE EXTENSION vector" to load this file. \quit
CREATE DOMAIN vector AS real[];
`
)

// EnsureVector makes an extension named vector available on this server: pgvector if it is
// installed; else pgvector built from ../shared/third_party/ and installed into the server's
// folders, replacing a stand-in an earlier run installed; else the stand-in, written into the
// server's extension folder. A file lock keeps concurrent test binaries from building or
// writing it at once, and the build happens once a machine (about 40 s of CPU). It answers an
// error only where neither could be had.
func (s *Server) EnsureVector() (Vector, error) {
	dirs, err := s.Folders()
	if err != nil {
		return Vector{}, err
	}
	return ensureVector(dirs, pgvectorSource())
}

// ensureVector is EnsureVector on the server's folders, with src the pgvector tarball ("" for
// none).
func ensureVector(dirs Folders, src string) (Vector, error) {
	unlock, err := lock("pgvector.lock")
	if err != nil {
		return Vector{}, err
	}
	defer unlock()
	control := filepath.Join(dirs.Extension, "vector.control")
	raw, err := os.ReadFile(control)
	if err == nil && !strings.Contains(string(raw), standInMark) {
		return Vector{Real: true}, nil
	}
	why := buildPGVector(dirs, src)
	if why == nil {
		return Vector{Real: true}, nil
	}
	v := Vector{Why: why.Error()}
	if err == nil {
		return v, nil // the stand-in is there already
	}
	// The script first and the control file last, each by rename, so that a server looking
	// at the folder meanwhile (another test binary's) never reads half a file.
	for _, f := range []struct{ name, content string }{{vectorScriptName, vectorScript}, {"vector.control", vectorControl}} {
		written, err := place(filepath.Join(dirs.Extension, f.name), []byte(f.content), 0o644)
		if !written {
			return Vector{}, fmt.Errorf("the extension folder %s cannot be written: %w", dirs.Extension, err)
		}
		if err != nil {
			return Vector{}, fmt.Errorf("install %s: %w", f.name, err)
		}
	}
	return v, nil
}

// buildPGVector builds pgvector from src and installs it, each file by rename and the control
// file last, as the stand-in is; it answers why not where it cannot.
func buildPGVector(dirs Folders, src string) error {
	if src == "" {
		return fmt.Errorf("no %s in ../shared/third_party/ beside the project", pgvectorTarball)
	}
	if err := checkDigest(src, pgvectorSHA256); err != nil {
		return err
	}
	if dirs.PGConfig == "" {
		return errors.New("the server has no pg_config nor headers beside its binaries to build pgvector with " +
			"(the pinned npm binaries of make test PG=<major> ship none)")
	}
	if !exists(dirs.PGXS) {
		return fmt.Errorf("no PostgreSQL server headers to build pgvector with (no %s); install postgresql-server-dev-%s",
			dirs.PGXS, dirs.Major)
	}
	for _, tool := range []string{"make", "gcc", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("no %s to build pgvector with", tool)
		}
	}
	for _, dir := range []string{dirs.Extension, dirs.Lib} {
		if err := writable(dir); err != nil {
			return fmt.Errorf("pgvector cannot be installed: %w", err)
		}
	}
	tmp, err := os.MkdirTemp("", "pgvector-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := RunGroup(exec.Command("tar", "-xzf", src, "-C", tmp), time.Minute); err != nil {
		return err
	}
	srcDir := filepath.Join(tmp, strings.TrimSuffix(pgvectorTarball, ".tar.gz"))
	stage := filepath.Join(tmp, "stage")
	// No LLVM bitcode: the servers here run without JIT, and it would double the build.
	vars := []string{"-C", srcDir, "PG_CONFIG=" + dirs.PGConfig, "with_llvm=no"}
	if _, err := RunGroup(exec.Command("make", append(vars, "-j"+strconv.Itoa(runtime.NumCPU()))...), 15*time.Minute); err != nil {
		return fmt.Errorf("build pgvector: %w", err)
	}
	if _, err := RunGroup(exec.Command("make", append(vars, "install", "DESTDIR="+stage)...), 5*time.Minute); err != nil {
		return fmt.Errorf("install pgvector: %w", err)
	}
	if err := installStaged(stage); err != nil {
		return fmt.Errorf("install pgvector: %w", err)
	}
	// The stand-in's script would pass for a version of pgvector.
	script := filepath.Join(dirs.Extension, vectorScriptName)
	if raw, err := os.ReadFile(script); err == nil && string(raw) == vectorScript {
		_ = os.Remove(script)
	}
	return nil
}

// pgvectorSource is the pgvector tarball in ../shared/third_party/ from the project's root (the
// nearest folder up from the working folder that holds go.mod), "" where there is none.
func pgvectorSource() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if exists(filepath.Join(dir, "go.mod")) {
			src := filepath.Join(filepath.Dir(dir), "shared", "third_party", pgvectorTarball)
			if !exists(src) {
				return ""
			}
			return src
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func checkDigest(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s has sha256 %s, not %s: not built", path, got, want)
	}
	return nil
}

func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".write-test-")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// installStaged moves what `make install DESTDIR=stage` put under stage to where it belongs, each
// file written beside its place and renamed into it, control files last: a server reading the
// folder meanwhile sees the old extension or the new one, whole.
func installStaged(stage string) error {
	var files []string
	err := filepath.WalkDir(stage, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Slice(files, func(i, j int) bool { return controlLast(files[i], files[j]) })
	for _, path := range files {
		dest := strings.TrimPrefix(path, stage)
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if _, err := place(dest, raw, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// lock takes an exclusive lock on a file in the root, waiting for it, and answers how to let
// it go. The kernel lets it go where this process dies holding it.
func lock(name string) (func(), error) {
	r, err := root()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(r, name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}
