package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/novox/postgres-provider/adapters/logger"
	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/domain"
)

// Config is the daemon's configuration, from flags and PROVISIONER_* variables.
type Config struct {
	Receives     string
	Resource     string
	DatabaseURL  string
	Every        time.Duration
	VerifyEvery  time.Duration
	HoldsTimeout time.Duration
	OnWithdraw   domain.Policy
	DropAfter    time.Duration
	Settle       time.Duration
	Adopt        postgres.Adopt
	Parallel     int
	MaxConns     int
	AllowExts    []string
	ConnLimit    int
	Once         bool
	Listen       string
	LogFormat    string
	LogLevel     slog.Level
	Version      bool
	Help         bool
}

// DefaultParallel is --parallel's default: on a 2-core server, creates from nothing stop
// getting faster past it (see the note of issue 12 and `make compare`).
const DefaultParallel = 8

// envName is the variable that stands for a flag: --holds-timeout is PROVISIONER_HOLDS_TIMEOUT.
func envName(flagName string) string {
	return "PROVISIONER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func flags(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("provisioner", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Receives, "receives", "", "the contributions file (required)")
	fs.StringVar(&c.Resource, "resource", "postgres", "the requirement this provider serves")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "the provider's superuser connection; else DATABASE_URL, else libpq's PG* variables")
	durationVar(fs, &c.Every, "every", domain.DefaultEvery, "time between passes")
	durationVar(fs, &c.VerifyEvery, "verify-every", domain.DefaultVerifyEvery, "how often to check that the server still holds each consumer")
	durationVar(fs, &c.HoldsTimeout, "holds-timeout", domain.DefaultHoldsTimeout, "how long one check may take")
	fs.Func("on-withdraw", "retain (default: the login goes, the data stays) or drop (database and role dropped after --drop-after)", func(s string) error {
		c.OnWithdraw = domain.Policy(s)
		if c.OnWithdraw != domain.Retain && c.OnWithdraw != domain.Drop {
			return errors.New("want retain or drop")
		}
		return nil
	})
	durationVar(fs, &c.DropAfter, "drop-after", 24*time.Hour, "with --on-withdraw drop: how long a withdrawn consumer keeps its data before it is dropped (0: at once)")
	durationVar(fs, &c.Settle, "withdraw-settle", domain.DefaultWithdrawSettle, "how long the contributions file must stay unchanged before what it no longer lists is withdrawn")
	fs.Func("adopt", "plain (default: an existing plain login role the provider did not make is taken over) or none", func(s string) error {
		c.Adopt = postgres.Adopt(s)
		if c.Adopt != postgres.AdoptPlain && c.Adopt != postgres.AdoptNone {
			return errors.New("want plain or none")
		}
		return nil
	})
	fs.IntVar(&c.Parallel, "parallel", DefaultParallel, "how many consumers' creates, checks and removes run at once")
	fs.IntVar(&c.MaxConns, "max-connections", 0, "the most connections the provider holds to the server (default twice --parallel)")
	fs.Func("allow-extensions", "the extensions consumers may have, a,b,c (default: every one the server has available)", func(s string) error {
		c.AllowExts = []string{}
		for _, name := range strings.Split(s, ",") {
			if name = strings.TrimSpace(name); name != "" {
				c.AllowExts = append(c.AllowExts, name)
			}
		}
		return nil
	})
	fs.IntVar(&c.ConnLimit, "connection-limit", -1, "each consumer's CONNECTION LIMIT where derived.connection_limit names none (-1: none)")
	fs.BoolVar(&c.Once, "once", false, "one pass, then exit: 0 when every listed consumer is held or created")
	fs.StringVar(&c.Listen, "listen", "", "serve /healthz, /readyz and /metrics on this address (off by default)")
	fs.StringVar(&c.LogFormat, "log-format", logger.Text, "text (the seed's lines) or json")
	c.LogLevel = slog.LevelInfo
	fs.Func("log-level", "the quietest lines said: debug, info (default), warn or error", func(s string) error {
		return c.LogLevel.UnmarshalText([]byte(s))
	})
	fs.BoolVar(&c.Version, "version", false, "print the version and exit")
	fs.BoolVar(&c.Help, "help", false, "print this help and exit")
	return fs
}

// durationVar is flag.DurationVar with an error that shows what a duration looks like.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Func(name, fmt.Sprintf("%s (default %s)", usage, value), func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as 5s, 1m30s or 250ms")
		}
		*p = d
		return nil
	})
}

// parse reads args, then, for each flag the command line did not set, its PROVISIONER_*
// variable: a flag beats its variable. DATABASE_URL stands in where neither names the server.
// Every error it answers is bad usage or configuration.
func parse(args []string, env map[string]string) (Config, error) {
	c := Config{OnWithdraw: domain.Retain, Adopt: postgres.AdoptPlain}
	fs := flags(&c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{Help: true}, nil
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		v, ok := env[envName(f.Name)]
		if err != nil || set[f.Name] || !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q: %v", envName(f.Name), v, e)
		}
	})
	if err != nil {
		return c, err
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = env["DATABASE_URL"]
	}
	if c.Help || c.Version {
		return c, nil
	}
	if c.MaxConns == 0 {
		c.MaxConns = 2 * c.Parallel
	}
	return c, c.check()
}

func (c Config) check() error {
	switch {
	case c.Receives == "":
		return fmt.Errorf("--receives is required (or %s): the contributions file to read", envName("receives"))
	case c.Resource == "":
		return fmt.Errorf("--resource is empty")
	case c.Every <= 0:
		return fmt.Errorf("--every %s: want a positive duration", c.Every)
	case c.VerifyEvery <= 0:
		return fmt.Errorf("--verify-every %s: want a positive duration", c.VerifyEvery)
	case c.HoldsTimeout <= 0:
		return fmt.Errorf("--holds-timeout %s: want a positive duration", c.HoldsTimeout)
	case c.ConnLimit < -1 || c.ConnLimit == 0:
		return fmt.Errorf("--connection-limit %d: want a positive number of connections, or -1 for none", c.ConnLimit)
	case c.Parallel < 1:
		return fmt.Errorf("--parallel %d: want at least 1", c.Parallel)
	case c.MaxConns < 0 || c.MaxConns == 1:
		return fmt.Errorf("--max-connections %d: want at least 2 (one pooled, one to a consumer's database)", c.MaxConns)
	case c.DropAfter < 0:
		return fmt.Errorf("--drop-after %s: want zero or a positive duration", c.DropAfter)
	case c.Settle < time.Second:
		// A mass withdrawal is held six times the settle: below a second it would be said
		// held and done within one pass, and a writer has no time to finish a rewrite.
		return fmt.Errorf("--withdraw-settle %s: want at least 1s", c.Settle)
	case c.LogFormat != logger.Text && c.LogFormat != logger.JSON:
		return fmt.Errorf("--log-format %q: want text or json", c.LogFormat)
	}
	return nil
}

// redact is text with the password of a connection URL replaced, for messages about it.
func redact(text, connURL string) string {
	u, err := url.Parse(connURL)
	if err != nil || u.User == nil {
		return redactKeyValue(text, connURL)
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
			text = strings.ReplaceAll(text, form, "xxxxx")
		}
	}
	return text
}

// redactKeyValue hides password=... of a key=value connection string.
func redactKeyValue(text, conn string) string {
	for _, field := range strings.Fields(conn) {
		if k, v, ok := strings.Cut(field, "="); ok && k == "password" && v != "" {
			text = strings.ReplaceAll(text, strings.Trim(v, "'"), "xxxxx")
		}
	}
	return text
}

const usageText = `provisioner: the novox service mesh's PostgreSQL provider.

Reads the consumers the mesh lists in the contributions file and brings each one's login,
database and extensions into being on the server, under the password the mesh minted; checks
that the server still holds them, repairs what drifted, withdraws what is no longer listed.

Usage:
  provisioner --receives PATH [flags]
  provisioner status [--listen ADDR]     each consumer's status, from a running provisioner

The contributions file's format: docs/contributions.md (every field, what a missing one
means, an example), also at https://github.com/novox/postgres-provider/blob/main/docs/contributions.md.

Flags (each also read from PROVISIONER_<NAME>, e.g. PROVISIONER_DATABASE_URL; a flag beats its
variable):
`

func writeUsage(w io.Writer) {
	var c Config
	fs := flags(&c)
	fs.SetOutput(w)
	fmt.Fprint(w, usageText)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Exit codes: 0 normal end (SIGINT or SIGTERM), or with --once every consumer held or created;
1 with --once when any is not, or the file said nothing; 2 bad usage or configuration.
`)
}
