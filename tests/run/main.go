// Command run is `make run`: the provisioner's main job on an embedded default. It starts a
// throwaway PostgreSQL under .run/ (the tests' own helper), writes a contributions file in
// which letta asks for vector, pg_trgm and dblink, and its secret, runs bin/provisioner in the
// foreground with short intervals, and prints how to connect as letta, and once letta has all
// it asked for, that it is provisioned. Ctrl-C, SIGTERM or closing the terminal (SIGHUP) stops
// both and removes .run/; where this process is killed outright, the kernel stops both, and
// the next `make run` removes what is left.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// extensions are what letta asks for.
var extensions = []string{"vector", "pg_trgm", "dblink"}

// stopGrace is how long the provisioner may take to stop on SIGTERM: the pass under way
// finishes, bounded by its holds timeout (30 s).
const stopGrace = 45 * time.Second

func main() { os.Exit(run()) }

func run() int {
	// Signals are caught from the start, so that one while the server starts still stops it.
	// SIGPIPE too: with a closed pipe for stdout (`make run | less`, quit), a write would
	// otherwise end this process before it stopped the others.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		<-signals
		stop()
	}()

	root, err := filepath.Abs(".run")
	if err != nil {
		return fail(err)
	}
	// A server an earlier make run left (it was killed outright) is stopped before its folder
	// goes; one of a make run still running here is not, and this one ends.
	if err := pgserver.StopOrphan(filepath.Join(root, "pg")); err != nil {
		return fail(fmt.Errorf("%w: another make run is using .run/", err))
	}
	_ = os.RemoveAll(root) // throwaway: every run starts fresh
	// .run itself is open to traverse: the server runs as the postgres OS user when this is root.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fail(err)
	}
	defer func() {
		_ = os.RemoveAll(root)
		fmt.Println("make run: provisioner and PostgreSQL stopped; .run/ removed")
	}()
	if err := os.Mkdir(filepath.Join(root, "secrets"), 0o700); err != nil {
		return fail(err)
	}

	fmt.Println("make run: starting a throwaway PostgreSQL under .run/pg ...")
	srv, err := pgserver.Start(pgserver.Options{Dir: filepath.Join(root, "pg")})
	if err != nil {
		return fail(err)
	}
	defer func() { _ = srv.Stop() }()
	if ctx.Err() != nil {
		return 0
	}
	fmt.Println("make run: making sure the server has a vector extension (building pgvector, the first time, takes a minute) ...")
	if v, err := srv.EnsureVector(); err != nil {
		fmt.Printf("make run: no vector extension on this server (%v); the provisioner will say it skips it\n", err)
	} else {
		fmt.Printf("make run: vector is %s\n", v)
	}
	if ctx.Err() != nil {
		return 0
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
		"values":  map[string]any{"name": "letta", "extensions": extensions},
		"derived": map[string]any{"database": "letta"},
	}}}
	raw, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(contributions, raw, 0o600); err != nil {
		return fail(err)
	}
	listen, err := pgserver.FreeAddr()
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
	// A group of its own, as the server's: stopped by us, in order, after a Ctrl-C; told to
	// stop by the kernel where this process dies first.
	provisioner, err := pgserver.StartGroup(cmd, syscall.SIGTERM)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if !provisioner.Stop(syscall.SIGTERM, stopGrace) {
			fmt.Fprintf(os.Stderr, "make run: the provisioner did not stop within %s; killed\n", stopGrace)
		}
	}()
	sheet, err := cheatSheet(root, srv.URL, srv.Port, listen, contributions, secret)
	if err != nil {
		return fail(err)
	}
	go announce(ctx, srv.Port, hex.EncodeToString(password), sheet)
	select {
	case <-ctx.Done():
		return 0
	case <-provisioner.Exited():
		if err := provisioner.Err(); err != nil {
			return fail(fmt.Errorf("the provisioner ended: %w", err))
		}
		return 0
	}
}

// announce says, once it is so, that letta is provisioned: it logs in with the minted password,
// and every extension it asks for that the server has is in its database. It says so as letta
// sees it, and keeps asking until then.
func announce(ctx context.Context, port int, password, sheet string) {
	url := fmt.Sprintf("postgres://letta:%s@127.0.0.1:%d/letta?sslmode=disable", password, port)
	late := time.After(time.Minute)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if has, lacks, ok := provisioned(ctx, url); ok {
			fmt.Printf("make run: letta is provisioned: it logs in with the minted password; its database has %s\n", has)
			if lacks != "" {
				fmt.Printf("make run: this server has no %s; the provisioner skips it\n", lacks)
			}
			fmt.Print(sheet)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-late:
			fmt.Println("make run: letta is not provisioned after a minute; the provisioner's lines above say why")
		case <-tick.C:
		}
	}
}

// provisioned answers, as letta, the extensions in its database and those it asks for that the
// server lacks; ok when letta logs in and has every one it asks for that the server has.
func provisioned(ctx context.Context, url string) (has, lacks string, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", "", false
	}
	defer conn.Close(ctx)
	var missing int
	err = conn.QueryRow(ctx, `SELECT
		(SELECT string_agg(extname, ', ' ORDER BY extname) FROM pg_extension),
		(SELECT count(*) FROM pg_available_extensions WHERE name = ANY($1) AND installed_version IS NULL),
		(SELECT coalesce(string_agg(w, ', ' ORDER BY w), '') FROM unnest($1::text[]) w
			WHERE w NOT IN (SELECT name FROM pg_available_extensions))`, extensions).Scan(&has, &missing, &lacks)
	if err != nil || missing > 0 {
		return "", "", false
	}
	return has, lacks, true
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "make run: %v\n", err)
	return 1
}

// cheatSheet is what make run prints once letta is provisioned: each command works as pasted
// in the project's folder while make run runs, and none prints a password. plan connects as
// the server's superuser with a password file (.run/pgpass, mode 0600) rather than a URL that
// holds the password.
func cheatSheet(root, superURL string, port int, listen, contributions, secret string) (string, error) {
	u, err := url.Parse(superURL)
	if err != nil {
		return "", fmt.Errorf("the server's URL: %w", err)
	}
	password, _ := u.User.Password()
	passfile := filepath.Join(root, "pgpass")
	line := fmt.Sprintf("127.0.0.1:%d:*:%s:%s\n", port, pgpassEscape(u.User.Username()), pgpassEscape(password))
	if err := os.WriteFile(passfile, []byte(line), 0o600); err != nil {
		return "", err
	}
	u.User = url.User(u.User.Username())
	rel := func(path string) string {
		if r, err := filepath.Rel(filepath.Dir(root), path); err == nil {
			return r
		}
		return path
	}
	return fmt.Sprintf(`make run: try it, from this folder, while make run runs (no line prints a password):
  PGPASSWORD="$(cat %[1]s)" psql -h 127.0.0.1 -p %[2]d -U letta letta
  curl -s http://%[3]s/status
  bin/provisioner status --listen %[3]s
  PGPASSFILE=%[4]s bin/provisioner plan --receives %[5]s --database-url '%[6]s'
make run: to add a consumer, write its password to .run/secrets/NAME.postgres (mode 0600) and add
  {"as": "NAME", "secret": "%[7]s", "values": {"name": "NAME", "extensions": ["pg_trgm"]}}
  to the "given" list of %[5]s: it is made within a second of the file's change.
  To remove one, take its entry out: its login is withdrawn once the file has stayed unchanged
  for 10s, its data kept.
`, rel(secret), port, listen, rel(passfile), rel(contributions), u.String(),
		filepath.Join(filepath.Dir(secret), "NAME.postgres")), nil
}

// pgpassEscape escapes a field of a password file: a colon or a backslash is preceded by a
// backslash.
func pgpassEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `:`, `\:`).Replace(s)
}
