package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// A primary and its streaming standby, for the tests of failover: StartStandby copies a running
// server with pg_basebackup -R (which writes the standby's primary_conninfo), or where there is
// no pg_basebackup of the server's version (the pinned npm binaries have only the server) does
// what it does with the server's own backup functions, and starts the copy on a port of its own; Promote makes it a primary; StopImmediate stops a server as
// `pg_ctl stop -m immediate` does, as a crash would.

// StartStandby makes a streaming standby of s: a base backup of s into a folder of its own
// (opts.Dir, else a new one from NewDir, removed by Stop), started as s is (loopback only, its
// own free port unless opts.Port names one, as the postgres OS user when root, in a process
// group of its own) with opts.Settings, following s until it is promoted. It returns once the
// standby takes connections (read only).
func (s *Server) StartStandby(opts Options) (*Server, error) {
	password, err := s.storedPassword()
	if err != nil {
		return nil, err
	}
	st, run, err := newServer(s.Bin, opts)
	if err != nil {
		return nil, err
	}
	if _, err := st.storePassword(password, run); err != nil {
		return nil, st.fail(err)
	}
	data := filepath.Join(st.Dir, "data")
	if tool := s.basebackup(); tool != "" {
		cmd := exec.Command(tool, "-D", data, "-R", "-X", "stream", "-c", "fast", "--no-sync",
			"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres")
		cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGSSLMODE=disable")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: run}
		_, err = RunGroup(cmd, 5*time.Minute)
	} else {
		err = s.backupByHand(data, password, run)
	}
	if err != nil {
		return nil, st.fail(err)
	}
	if err := st.launch(run, data, password, opts); err != nil {
		return nil, err
	}
	return st, nil
}

// Promote makes a standby a primary (pg_promote), and returns once it is one.
func (s *Server) Promote() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var promoted bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_promote(true, 60)").Scan(&promoted); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	if !promoted {
		return fmt.Errorf("promote: the server on port %d was not promoted within 60 s", s.Port)
	}
	return nil
}

// StopImmediate stops the server as `pg_ctl stop -m immediate` does (SIGQUIT: no checkpoint,
// sessions cut off, crash recovery at the next start), and keeps its folder until Stop.
func (s *Server) StopImmediate() { s.stopServer(syscall.SIGQUIT) }

// Recovering is whether the server is in recovery (a standby).
func (s *Server) Recovering(ctx context.Context) (bool, error) {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var recovering bool
	err = conn.QueryRow(ctx, "SELECT pg_catalog.pg_is_in_recovery()").Scan(&recovering)
	return recovering, err
}

// basebackup is a pg_basebackup that can copy s: beside its binaries, else Debian's of its major
// version; "" where there is none (the pinned npm binaries have only the server).
func (s *Server) basebackup() string {
	candidates := []string{filepath.Join(s.Bin, "pg_basebackup")}
	if f, err := s.Folders(); err == nil {
		candidates = append(candidates, filepath.Join("/usr/lib/postgresql", f.Major, "bin", "pg_basebackup"))
	}
	for _, c := range candidates {
		if exists(c) {
			return c
		}
	}
	return ""
}

// notCopied are the folders of a data folder whose files a base backup leaves out, as
// pg_basebackup does: the standby fetches the WAL it needs from the primary, and the rest is
// made anew at its start.
var notCopied = []string{"pg_wal", "pg_replslot", "pg_dynshmem", "pg_notify", "pg_serial", "pg_snapshots", "pg_stat_tmp", "pg_subtrans"}

// backupByHand does what pg_basebackup -R does, with the server's own backup functions: the
// backup started on one session (a fast checkpoint), the data folder copied while the server
// runs (a file that goes meanwhile is left out: the WAL replayed from the checkpoint on makes
// the copy consistent), the backup stopped, and its label written in the copy, which is then
// told to follow s (standby.signal, primary_conninfo). The copy is run's, where run is not nil.
func (s *Server) backupByHand(data, password string, run *syscall.Credential) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version int
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_version_num')::int").Scan(&version); err != nil {
		return err
	}
	start, stop := "SELECT pg_catalog.pg_backup_start('standby', true)", "SELECT labelfile, spcmapfile FROM pg_catalog.pg_backup_stop(false)"
	if version < 150000 {
		start, stop = "SELECT pg_catalog.pg_start_backup('standby', true, false)", "SELECT labelfile, spcmapfile FROM pg_catalog.pg_stop_backup(false, false)"
	}
	if _, err := conn.Exec(ctx, start); err != nil {
		return fmt.Errorf("start the backup: %w", err)
	}
	if err := copyData(filepath.Join(s.Dir, "data"), data, run); err != nil {
		return fmt.Errorf("copy the data folder: %w", err)
	}
	var label, spcmap string
	if err := conn.QueryRow(ctx, stop).Scan(&label, &spcmap); err != nil {
		return fmt.Errorf("stop the backup: %w", err)
	}
	files := map[string]string{"backup_label": label, "standby.signal": ""}
	if spcmap != "" {
		files["tablespace_map"] = spcmap
	}
	for name, content := range files {
		if err := writeAs(filepath.Join(data, name), []byte(content), run); err != nil {
			return err
		}
	}
	auto := filepath.Join(data, "postgresql.auto.conf")
	conf, err := os.ReadFile(auto)
	if err != nil {
		return err
	}
	conf = fmt.Appendf(conf, "primary_conninfo = 'host=127.0.0.1 port=%d user=postgres password=%s sslmode=disable'\n", s.Port, password)
	return writeAs(auto, conf, run)
}

// copyData copies the data folder from into to (made here), keeping each file's mode, as
// run's; the files of notCopied's folders are left out, and a file that went while it was
// copied is too.
func copyData(from, to string, run *syscall.Credential) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
			return own(target, run)
		case rel == "postmaster.pid" || rel == "postmaster.opts" ||
			slices.ContainsFunc(notCopied, func(dir string) bool { return strings.HasPrefix(rel, dir+string(filepath.Separator)) }):
			return nil
		case !info.Mode().IsRegular():
			return nil
		}
		raw, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, raw, info.Mode().Perm()); err != nil {
			return err
		}
		return own(target, run)
	})
}

// writeAs writes a file of the server's, run's where run is not nil.
func writeAs(path string, content []byte, run *syscall.Credential) error {
	if err := os.WriteFile(path, content, 0o600); err != nil {
		return err
	}
	return own(path, run)
}

func own(path string, run *syscall.Credential) error {
	if run == nil {
		return nil
	}
	return os.Chown(path, int(run.Uid), int(run.Gid))
}
