// Command run is `make run`: the provisioner's main job on an embedded default. It starts a
// throwaway PostgreSQL under .run/ (the tests' own helper), writes a contributions file in
// which letta asks for vector, pg_trgm and dblink, and its secret, runs bin/provisioner in the
// foreground with short intervals, and prints how to connect as letta. Ctrl-C stops both.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/tests/pgserver"
)

func main() { os.Exit(run()) }

func run() int {
	root, err := filepath.Abs(".run")
	if err != nil {
		return fail(err)
	}
	_ = os.RemoveAll(root) // throwaway: every run starts fresh
	// .run itself is open to traverse: the server runs as the postgres OS user when this is root.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fail(err)
	}
	if err := os.Mkdir(filepath.Join(root, "secrets"), 0o700); err != nil {
		return fail(err)
	}
	// Signals are caught from here on, so that a Ctrl-C while the server starts still stops it.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)

	fmt.Println("make run: starting a throwaway PostgreSQL under .run/pg ...")
	srv, err := pgserver.Start(pgserver.Options{Dir: filepath.Join(root, "pg")})
	if err != nil {
		return fail(err)
	}
	defer func() {
		_ = srv.Stop()
		_ = os.RemoveAll(root)
		fmt.Println("make run: provisioner and PostgreSQL stopped; .run/ removed")
	}()
	if _, err := srv.EnsureVector(); err != nil {
		fmt.Printf("make run: no vector extension on this server (%v); the provisioner will say it skips it\n", err)
	}

	secret := filepath.Join(root, "secrets", "letta.postgres")
	password := make([]byte, 18)
	_, _ = rand.Read(password)
	if err := os.WriteFile(secret, []byte(hex.EncodeToString(password)+"\n"), 0o600); err != nil {
		return fail(err)
	}
	contributions := filepath.Join(root, "contributions.json")
	doc := map[string]any{"requirement": "postgres", "given": []any{map[string]any{
		"as": "letta", "secret": secret, "node": "letta", "at": "127.0.0.1",
		"values":  map[string]any{"name": "letta", "extensions": []string{"vector", "pg_trgm", "dblink"}},
		"derived": map[string]any{"database": "letta"},
	}}}
	raw, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(contributions, raw, 0o600); err != nil {
		return fail(err)
	}
	listen, err := freeAddr()
	if err != nil {
		return fail(err)
	}

	fmt.Printf(`make run: contributions file %s
make run: metrics at http://%s/metrics, readiness at http://%s/readyz
make run: connect as letta with:
  PGPASSWORD="$(cat %s)" psql -h 127.0.0.1 -p %d -U letta letta
make run: Ctrl-C stops the provisioner and the server.

`, contributions, listen, listen, secret, srv.Port)

	cmd := exec.Command("bin/provisioner", "--receives", contributions,
		"--every", "2s", "--verify-every", "10s", "--listen", listen)
	// The superuser's URL holds its password: in the environment, not in what ps shows.
	cmd.Env = append(os.Environ(), "PROVISIONER_DATABASE_URL="+srv.URL)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	go announce(srv.Port, hex.EncodeToString(password))
	select {
	case <-signals:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		return 0
	case err := <-exited:
		if err != nil {
			return fail(fmt.Errorf("the provisioner ended: %w", err))
		}
		return 0
	}
}

// announce says once letta can log in, and what it has: what the provisioner brought about,
// seen as letta sees it.
func announce(port int, password string) {
	url := fmt.Sprintf("postgres://letta:%s@127.0.0.1:%d/letta?sslmode=disable", password, port)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			var exts string
			err = conn.QueryRow(ctx, "SELECT string_agg(extname, ', ' ORDER BY extname) FROM pg_extension").Scan(&exts)
			conn.Close(ctx)
			cancel()
			if err == nil {
				fmt.Printf("make run: letta is provisioned: it logs in with the minted password; its database has %s\n", exts)
				return
			}
		}
		cancel()
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Println("make run: letta could not log in within a minute; the provisioner's lines above say why")
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "make run: %v\n", err)
	return 1
}
