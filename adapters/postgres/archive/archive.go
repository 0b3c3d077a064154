// Package archive makes, keeps and fetches the archives a drop leaves: pg_dump's custom format,
// streamed to a folder or to an operator's command (as PostgreSQL's archive_command), checked
// before it counts, and restored by pg_restore. It knows nothing of SQL; the PostgreSQL adapter
// says what to dump, as whom, and records what was made.
package archive

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config is how archives are made and kept.
type Config struct {
	// Dir is a folder the archives are files in (--archive-to).
	Dir string
	// Command stores an archive from its standard input (--archive-command): run by sh -c,
	// %f replaced by the archive's name (shell-quoted), %% by %.
	Command string
	// RestoreCommand writes the archive %f to the path %p (--restore-command).
	RestoreCommand string
	// PgDump is pg_dump's path; empty finds it on PATH. pg_restore is the one beside it, else
	// PATH's.
	PgDump string
	// Keep is how long archives stay in Dir (Sweep); zero keeps them.
	Keep time.Duration
}

// Archiver makes and fetches archives as its Config says. It is safe for concurrent use.
type Archiver struct {
	cfg               Config
	pgDump, pgRestore string
}

// New checks cfg and answers its Archiver: exactly one of a folder and a command, the folder
// one this process can write to, pg_dump and pg_restore found.
func New(cfg Config) (*Archiver, error) {
	switch {
	case cfg.Dir == "" && cfg.Command == "":
		return nil, errors.New("archives: give --archive-to or --archive-command")
	case cfg.Dir != "" && cfg.Command != "":
		return nil, errors.New("--archive-to and --archive-command: give one of them")
	case cfg.Dir != "":
		if err := writable(cfg.Dir); err != nil {
			return nil, fmt.Errorf("--archive-to %s: %w", cfg.Dir, err)
		}
	}
	a := &Archiver{cfg: cfg}
	var err error
	if a.pgDump, err = find(cfg.PgDump, "pg_dump", "--pg-dump"); err != nil {
		return nil, err
	}
	beside := filepath.Join(filepath.Dir(a.pgDump), "pg_restore")
	if _, err := os.Stat(beside); err != nil {
		beside = ""
	}
	if a.pgRestore, err = find(beside, "pg_restore", "--pg-dump"); err != nil {
		return nil, err
	}
	return a, nil
}

// writable answers nil where dir is a folder this process may create files in.
func writable(dir string) error {
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return errors.New("not a folder")
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("cannot write there: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// find is path where given, else name on PATH.
func find(path, name, flag string) (string, error) {
	if path == "" {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%s: not found on PATH (give %s)", name, flag)
		}
		return p, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s %s: not an executable file", flag, path)
	}
	return path, nil
}

var versionLine = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// DumpMajor is pg_dump's major version and its version line: "pg_dump (PostgreSQL) 15.18" is 15,
// "pg_dump (PostgreSQL) 18beta1" 18.
func (a *Archiver) DumpMajor(ctx context.Context) (int, string, error) {
	version := a.command(ctx, Source{}, a.pgDump, "--version")
	var out bytes.Buffer
	version.cmd.Stdout = &out
	if err := version.run("pg_dump --version"); err != nil {
		return 0, "", err
	}
	line := strings.TrimSpace(out.String())
	m := versionLine.FindStringSubmatch(line)
	if m == nil {
		return 0, "", fmt.Errorf("%s --version: %q is not a version line", a.pgDump, line)
	}
	n, _ := strconv.Atoi(m[1])
	return n, line, nil
}

// fixedIn is, per major version, the first minor release whose pg_dump restricts the kinds of
// relation it reads (restrict_nonsystem_relation_kind, CVE-2024-7348): before it, whoever can
// create objects in a database being dumped can swap a table for a view and run SQL in pg_dump's
// session. From 17 every release has it.
var fixedIn = map[int]int{12: 20, 13: 16, 14: 13, 15: 8, 16: 4}

var releaseOf = regexp.MustCompile(`\(PostgreSQL\) (\d+)(?:\.(\d+))?`)

// Unsafe is whether pg_dump's version line names a release without that fix.
func Unsafe(line string) bool {
	m := releaseOf.FindStringSubmatch(line)
	if m == nil {
		return true
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major < 12 || minor < fixedIn[major]
}

// Source is whom pg_dump and pg_restore connect as and to: Env holds libpq's variables
// (PGHOST, PGPASSWORD, PGDATABASE, ...), never a command line, which ps shows; Role, where
// set, is the role the session acts as (--role).
type Source struct {
	Env  []string
	Role string
}

// Made is one archive as written.
type Made struct {
	Name   string
	Size   int64
	SHA256 string
	Took   time.Duration
}

// Where is how the archive name's place reads in a line.
func (a *Archiver) Where(name string) string {
	if a.cfg.Dir != "" {
		return filepath.Join(a.cfg.Dir, name)
	}
	return name + " (via --archive-command)"
}

// Archive dumps the database src names as an archive named name, and answers it once it is
// whole and checked. With a folder it is written under a hidden partial name, fsynced, read back
// by pg_restore --list and only then renamed: a file named name is always a whole archive. With
// a command the stream is its standard input, and pg_restore --list reads it as it goes; the
// command's failure is the archive's. It never holds the archive in memory.
func (a *Archiver) Archive(ctx context.Context, src Source, name string) (Made, error) {
	start := time.Now()
	if strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
		return Made{}, fmt.Errorf("archive name %q: not a plain file name", name)
	}
	dump := a.command(ctx, src, a.pgDump, "--format=custom", "--no-password")
	out, err := dump.cmd.StdoutPipe()
	if err != nil {
		return Made{}, err
	}
	sum := sha256.New()
	counted := &counter{}
	var made Made
	if a.cfg.Dir != "" {
		made, err = a.toFolder(ctx, dump, out, io.MultiWriter(sum, counted), name)
	} else {
		err = a.toCommand(ctx, dump, out, io.MultiWriter(sum, counted), name)
	}
	if err != nil {
		return Made{}, err
	}
	made.Name, made.Size, made.SHA256, made.Took = name, counted.n, hex.EncodeToString(sum.Sum(nil)), time.Since(start)
	return made, nil
}

// toFolder streams the dump to Dir's partial file, checks it and renames it to name.
func (a *Archiver) toFolder(ctx context.Context, dump *child, out io.Reader, tally io.Writer, name string) (Made, error) {
	final := filepath.Join(a.cfg.Dir, name)
	if _, err := os.Lstat(final); err == nil {
		return Made{}, fmt.Errorf("%s exists: an archive is never written over", final)
	}
	partial := filepath.Join(a.cfg.Dir, "."+name+".partial")
	_ = os.Remove(partial) // a dead process's
	f, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Made{}, err
	}
	done := false
	defer func() {
		f.Close()
		if !done {
			_ = os.Remove(partial)
		}
	}()
	if err := dump.start(); err != nil {
		return Made{}, err
	}
	_, copyErr := io.Copy(io.MultiWriter(f, tally), out)
	if copyErr != nil {
		dump.kill() // the folder takes no more (a full disk): dumping on would write nowhere
	}
	dumpErr := dump.wait("pg_dump")
	if copyErr != nil {
		return Made{}, a.inFolder(copyErr)
	}
	if dumpErr != nil {
		return Made{}, dumpErr
	}
	if err := f.Sync(); err != nil {
		return Made{}, a.inFolder(err)
	}
	if err := f.Close(); err != nil {
		return Made{}, a.inFolder(err)
	}
	check := a.command(ctx, Source{}, a.pgRestore, "--list", partial)
	check.cmd.Stdout = io.Discard
	if err := check.run("pg_restore --list"); err != nil {
		return Made{}, err
	}
	if err := os.Rename(partial, final); err != nil {
		return Made{}, err
	}
	done = true
	return Made{}, syncDir(a.cfg.Dir)
}

// inFolder is err of the partial file said of the folder: the same words at each try (a full
// disk), whatever the archive's name.
func (a *Archiver) inFolder(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s to %s: %w", pe.Op, a.cfg.Dir, pe.Err)
	}
	return err
}

// toCommand streams the dump to the archive command's standard input, and to pg_restore
// --list's as a check.
func (a *Archiver) toCommand(ctx context.Context, dump *child, out io.Reader, tally io.Writer, name string) error {
	store := a.command(ctx, Source{}, "/bin/sh", "-c", expand(a.cfg.Command, map[byte]string{'f': name}))
	in, err := store.cmd.StdinPipe()
	if err != nil {
		return err
	}
	check := a.command(ctx, Source{}, a.pgRestore, "--list")
	check.cmd.Stdout = io.Discard
	checkIn, err := check.cmd.StdinPipe()
	if err != nil {
		return err
	}
	children := []*child{store, check, dump}
	for i, c := range children {
		if err := c.start(); err != nil {
			for _, started := range children[:i] {
				started.kill()
				_ = started.cmd.Wait()
			}
			return err
		}
	}
	checker := &lenient{w: checkIn}
	_, copyErr := io.Copy(io.MultiWriter(in, checker, tally), out)
	if copyErr != nil {
		dump.kill() // only the command's input fails: it stopped reading, so dumping on is for nothing
	}
	dumpErr := dump.wait("pg_dump")
	checkIn.Close()
	checkErr := check.wait("pg_restore --list")
	if copyErr == nil && (dumpErr != nil || checkErr != nil) {
		// No end of input for a bad stream: a command that keeps what it read once its input
		// ends (an upload that completes at EOF) must not keep a part of an archive.
		store.kill()
	}
	in.Close()
	storeErr := store.wait("archive command")
	if copyErr != nil {
		return firstOf(storeErr, fmt.Errorf("archive command stopped reading the archive before its end: %w", copyErr))
	}
	return firstOf(dumpErr, checkErr, storeErr)
}

// firstOf is the first error that is not nil.
func firstOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lenient writes to w until w fails (a reader that has read all it needs and ended), then
// drops what follows.
type lenient struct {
	w    io.Writer
	gone bool
}

func (l *lenient) Write(p []byte) (int, error) {
	if !l.gone {
		if _, err := l.w.Write(p); err != nil {
			l.gone = true
		}
	}
	return len(p), nil
}

// counter counts the bytes written to it.
type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// Fetch makes the archive name available as a local file whose SHA-256 is sum: the folder's
// own file, or one the restore command writes to a temporary path. done removes what Fetch made.
func (a *Archiver) Fetch(ctx context.Context, name, sum string) (path string, done func(), err error) {
	done = func() {}
	if a.cfg.Dir != "" {
		path = filepath.Join(a.cfg.Dir, name)
	} else {
		if a.cfg.RestoreCommand == "" {
			return "", nil, fmt.Errorf("archive %s: give --restore-command to fetch it from where --archive-command stored it", name)
		}
		tmp, err := os.MkdirTemp("", "provisioner-restore-*")
		if err != nil {
			return "", nil, err
		}
		done = func() { _ = os.RemoveAll(tmp) }
		path = filepath.Join(tmp, name)
		fetch := a.command(ctx, Source{}, "/bin/sh", "-c", expand(a.cfg.RestoreCommand, map[byte]string{'f': name, 'p': path}))
		if err := fetch.run("restore command"); err != nil {
			done()
			return "", nil, err
		}
	}
	got, err := Sum(path)
	if err == nil && got != sum {
		err = fmt.Errorf("archive %s: its SHA-256 is %s, the record says %s; not restored (tampered with, or another file)", name, got, sum)
	}
	if err != nil {
		done()
		return "", nil, err
	}
	return path, done, nil
}

// Sum is the hex SHA-256 of the file at path, as Made.SHA256 says an archive's.
func Sum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// List is pg_restore --list of the archive at path: its table of contents, a line an entry.
func (a *Archiver) List(ctx context.Context, path string) ([]string, error) {
	list := a.command(ctx, Source{}, a.pgRestore, "--list", path)
	var out bytes.Buffer
	list.cmd.Stdout = &out
	if err := list.run("pg_restore --list"); err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// Restore restores the archive at path into the database src names, as src.Role, in one
// transaction, owned by that role: the entries of toc (its List, as the caller read it) but
// those keep turns down.
func (a *Archiver) Restore(ctx context.Context, src Source, path string, toc []string, keep func(entry string) bool) error {
	list, err := os.CreateTemp("", "provisioner-restore-*.list")
	if err != nil {
		return err
	}
	defer os.Remove(list.Name())
	w := bufio.NewWriter(list)
	for _, line := range toc {
		if strings.HasPrefix(line, ";") || keep(line) {
			fmt.Fprintln(w, line)
		}
	}
	if err := errors.Join(w.Flush(), list.Close()); err != nil {
		return err
	}
	restore := a.command(ctx, src, a.pgRestore, "--no-owner", "--exit-on-error", "--single-transaction", "--no-password",
		"--use-list="+list.Name(), "--dbname="+dbname(src), path)
	return restore.run("pg_restore")
}

// dbname is the database src's environment names, as a connection string: pg_restore needs
// --dbname (without it, it writes SQL to its stdout), and would take a bare name holding "=" for
// a connection string. The rest of the connection comes from src's environment still.
func dbname(src Source) string {
	for _, kv := range src.Env {
		if v, ok := strings.CutPrefix(kv, "PGDATABASE="); ok {
			return "dbname='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
		}
	}
	return ""
}

// Sweep deletes from the folder the archives older than Keep, and answers their names; and the
// partial files a dead process left (untouched for a day: a dump under way writes on).
func (a *Archiver) Sweep(now time.Time) ([]string, error) {
	if a.cfg.Dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(a.cfg.Dir)
	if err != nil {
		return nil, err
	}
	var gone []string
	var errs []error
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		partial := strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".partial")
		switch {
		case partial && now.Sub(info.ModTime()) < staleAfter:
			continue
		case !partial && (strings.HasPrefix(e.Name(), ".") || a.cfg.Keep <= 0 || now.Sub(info.ModTime()) < a.cfg.Keep):
			continue
		}
		if err := os.Remove(filepath.Join(a.cfg.Dir, e.Name())); err != nil {
			errs = append(errs, err)
		} else if !partial {
			gone = append(gone, e.Name())
		}
	}
	return gone, errors.Join(errs...)
}

// staleAfter is how long a partial file stays untouched before Sweep takes it for a dead
// process's.
const staleAfter = 24 * time.Hour

// expand replaces %x in command by the shell-quoted value of x, %% by %.
func expand(command string, values map[byte]string) string {
	var b strings.Builder
	for i := 0; i < len(command); i++ {
		if command[i] != '%' || i+1 == len(command) {
			b.WriteByte(command[i])
			continue
		}
		i++
		if v, ok := values[command[i]]; ok {
			b.WriteString(quote(v))
		} else {
			b.WriteByte('%')
			if command[i] != '%' {
				b.WriteByte(command[i])
			}
		}
	}
	return b.String()
}

// quote is s as one word of sh.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// syncDir fsyncs a folder, so that a rename in it outlives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
