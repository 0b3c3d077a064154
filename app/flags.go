package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/novox/postgres-provider/adapters/logger"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// envName is the variable that stands for a flag: --holds-timeout is PROVISIONER_HOLDS_TIMEOUT.
func envName(flagName string) string {
	return "PROVISIONER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// flags is the command line's flags, each setting its field of c, which it first sets to the
// flag's default. Its usage texts are --help's (writeUsage).
func flags(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("provisioner", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Backend = newKind()
	c.Backend.Flags(fs) // the kind's own: how to reach its server, what the provider may do there
	fs.StringVar(&c.Receives, "receives", "", "the contributions file the mesh writes for this provider: the consumers, each with "+
		"the path of its secret (the format: docs/contributions.md); required")
	fs.StringVar(&c.Resource, "resource", defaultResource(c.Backend), "the requirement this provider serves, as the mesh names it; "+
		"the provider's record on the server and its lease are kept per resource")
	durationVar(fs, &c.Every, "every", domain.DefaultEvery, "time between passes; a change to the file or a secret, or SIGHUP, starts one at once")
	durationVar(fs, &c.VerifyEvery, "verify-every", domain.DefaultVerifyEvery, "how often each consumer is checked: does the server still hold its login, database and extensions as made")
	durationVar(fs, &c.LoginCheckEvery, "login-check-every", domain.DefaultLoginCheckEvery, loginChecks(c.Backend)+"how often at least each "+
		"consumer's password is checked by logging in as it, the logins spread evenly over it; the rest of a check is made every --verify-every")
	fs.IntVar(&c.LoginRate, "login-rate", domain.DefaultLoginRate, loginChecks(c.Backend)+"the most logins a second those checks make")
	durationVar(fs, &c.InsideCheckEvery, "inside-check-every", domain.DefaultInsideCheckEvery, "how often at least what each "+
		"consumer was given is looked inside (its extensions, by a connection to each), the looks spread evenly over it; the "+
		"rest of a check is made every --verify-every; no longer than --verify-every looks inside at every check; SIGHUP looks inside all at once")
	fs.IntVar(&c.InsideRate, "inside-rate", domain.DefaultInsideRate, "the most looks inside a second those checks make")
	durationVar(fs, &c.HoldsTimeout, "holds-timeout", domain.DefaultHoldsTimeout, "the longest one check may take; one that times out ends the checks of that pass")
	fs.Func("on-withdraw", "what becomes of a consumer the file no longer lists: retain (default) takes its login away and keeps its data; "+
		"drop does the same, then drops its database and role after --drop-after", func(s string) error {
		c.OnWithdraw = domain.Policy(s)
		if c.OnWithdraw != domain.Retain && c.OnWithdraw != domain.Drop {
			return errors.New("want retain or drop")
		}
		return nil
	})
	durationVar(fs, &c.DropAfter, "drop-after", 24*time.Hour, "with --on-withdraw drop: how long a withdrawn consumer keeps its data (0: dropped at once)")
	durationVar(fs, &c.Settle, "withdraw-settle", domain.DefaultWithdrawSettle, "how long the file must stay unchanged before what it no longer lists "+
		"is withdrawn (six times as long where that is more than half of the consumers), at least 1s")
	fs.IntVar(&c.Parallel, "parallel", DefaultParallel, "how many consumers are created, checked or withdrawn at once")
	fs.IntVar(&c.MaxConns, "max-connections", 0, "the most connections held to the server, the lease's besides (default twice --parallel)")
	c.ExtUpdates = domain.Staged
	fs.Func("extension-updates", "what becomes of a consumer's extension older than the version wanted: staged (default) updates it, "+
		"canaries first; off says it once and updates nothing", func(s string) error {
		c.ExtUpdates = domain.UpdatePolicy(s)
		if c.ExtUpdates != domain.Staged && c.ExtUpdates != domain.Off {
			return errors.New("want staged or off")
		}
		return nil
	})
	fs.IntVar(&c.Canaries, "extension-canaries", 1, "how many consumers take an extension version no consumer has yet, before the rest")
	durationVar(fs, &c.Soak, "extension-soak", domain.DefaultSoak, "how long the canaries hold a new extension version before the rest follow")
	fs.BoolVar(&c.Once, "once", false, "one pass, then exit: 0 when every listed consumer is held or created, else 1")
	fs.StringVar(&c.Listen, "listen", "", "serve /healthz, /readyz, /status and /metrics on this address, e.g. 127.0.0.1:9847 (default: off)")
	durationVar(fs, &c.ProgressEvery, "progress-every", 30*time.Second, "how often a line says where a pass that runs long stands")
	durationVar(fs, &c.UsageEvery, "usage-every", 5*time.Minute, "how often each consumer's database size and connections are read, in one query (0: never)")
	fs.BoolVar(&c.MetricsPerConsumer, "metrics-per-consumer", false, "each consumer's database size and connections on /metrics: a series per consumer")
	fs.StringVar(&c.LogFormat, "log-format", logger.Text, "text: one line per event on stderr, as alerts match them; json: the same as JSON objects")
	c.LogLevel = slog.LevelInfo
	fs.Func("log-level", "the quietest lines said: debug, info (default), warn or error", func(s string) error {
		return c.LogLevel.UnmarshalText([]byte(s))
	})
	fs.BoolVar(&c.Version, "version", false, "print the release and the commit, then exit")
	fs.BoolVar(&c.Help, "help", false, "print this help, then exit")
	return fs
}

// durationValue is a time.Duration flag whose error shows what a duration looks like.
type durationValue struct{ p *time.Duration }

func (d durationValue) String() string {
	if d.p == nil {
		return ""
	}
	return shortDuration(*d.p)
}

func (d durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 5s, 1m30s or 250ms")
	}
	*d.p = v
	return nil
}

func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}

// shortDuration is d as an operator writes it: 24h, 1m, 5s rather than 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// operatorWords is an error of the flag package with flags written as --help writes them:
// Go's says -every, the help and the README say --every.
func operatorWords(err error) error {
	return errors.New(strings.NewReplacer(
		"flag provided but not defined: -", "unknown flag --",
		"flag needs an argument: -", "flag needs an argument: --",
		" for flag -", " for --",
		" for -", " for --",
	).Replace(err.Error()))
}

// parse reads args, then, for each flag the command line did not set, its PROVISIONER_*
// variable: a flag beats its variable. DATABASE_URL stands in where neither names the server.
// Every error it answers is bad usage or configuration.
func parse(args []string, env map[string]string) (Config, error) {
	c := Config{OnWithdraw: domain.Retain}
	fs := flags(&c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{Help: true}, nil
		}
		return c, operatorWords(err)
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
	c.Backend.Environ(env)
	if c.Help || c.Version {
		return c, nil
	}
	if c.MaxConns == 0 {
		c.MaxConns = 2 * c.Parallel
	}
	return c, c.validate()
}

// usageText is --help's head, the provider named as its kind says (product).
const usageText = `provisioner: the novox service mesh's %s.

Reads the consumers the mesh lists in the contributions file and brings each one's login,
database and extensions into being on the server, under the password the mesh minted; checks
that the server still holds them, repairs what drifted, withdraws what is no longer listed.

Usage:
  provisioner --receives PATH [flags]     the daemon (with --once, one pass)
  provisioner status [--listen ADDR]      each consumer's status, and those leaving, from a
                                          running provisioner; exits 1 where it is not ready
  provisioner plan --receives PATH [flags]
                                          what a pass would do now, and why, changing nothing
  provisioner restore LOGIN [--from FILE] --receives PATH [flags]
                                          a dropped consumer's database made again from
                                          the archive its drop left (--archive-to)

The contributions file's format: docs/contributions.md (every field, what a missing one
means, an example), also at https://github.com/novox/postgres-provider/blob/main/docs/contributions.md.

Flags (each also read from its variable, shown in brackets; a flag beats its variable):
`

// flagOrder is the order --help lists the flags in: what to read, then the backend's own flags
// (kindsFlags: in the order the kind gives, ports.FlagOrder, else by name), then how often, then
// what to do, then how to be watched. A flag left out is listed after them.
var flagOrder = []string{"receives", "resource", kindsFlags, "every", "verify-every", "login-check-every", "login-rate",
	"inside-check-every", "inside-rate", "holds-timeout",
	"on-withdraw", "drop-after", "withdraw-settle", "extension-updates", "extension-canaries", "extension-soak",
	"parallel", "max-connections", "once", "listen", "progress-every", "usage-every",
	"metrics-per-consumer", "log-format", "log-level", "version", "help"}

// kindsFlags marks where in flagOrder the backend's own flags go.
const kindsFlags = "(the backend's)"

// placeholders name what a flag takes, as --help shows it (--every DURATION); a flag without
// one is a switch. A backend's flag names its own in its usage, in backquotes.
var placeholders = map[string]string{
	"receives": "PATH", "resource": "NAME", "every": "DURATION", "verify-every": "DURATION", "login-check-every": "DURATION", "login-rate": "N",
	"inside-check-every": "DURATION", "inside-rate": "N",
	"holds-timeout": "DURATION", "on-withdraw": "retain|drop", "drop-after": "DURATION", "withdraw-settle": "DURATION",
	"extension-updates": "staged|off", "extension-canaries": "N", "extension-soak": "DURATION", "parallel": "N",
	"max-connections": "N", "listen": "ADDR", "progress-every": "DURATION", "usage-every": "DURATION", "log-format": "text|json", "log-level": "LEVEL",
}

// kindsFlagOrder is the order --help lists kind's own flags in: the one it gives
// (ports.FlagOrder), else by name.
func kindsFlagOrder(kind ports.Kind) []string {
	if o, ok := kind.(ports.FlagOrder); ok {
		return o.FlagOrder()
	}
	var names []string
	own := flag.NewFlagSet("kind", flag.ContinueOnError)
	kind.Flags(own) // sets its fields to their defaults again: --help reads nothing else of it
	own.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

func writeUsage(w io.Writer) {
	var c Config
	fs := flags(&c)
	fmt.Fprintf(w, usageText, product(c.Backend))
	listed := map[string]bool{}
	show := func(f *flag.Flag) {
		if f == nil || listed[f.Name] {
			return
		}
		listed[f.Name] = true
		head, usage, p := "--"+f.Name, f.Usage, placeholders[f.Name]
		if strings.Contains(f.Usage, "`") { // a backend's flag names its placeholder in its usage, as flag.PrintDefaults reads it
			p, usage = flag.UnquoteUsage(f)
		}
		if p != "" {
			head += " " + p
		}
		var note []string
		if f.Name != "version" && f.Name != "help" {
			note = append(note, envName(f.Name))
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" && p != "" {
			note = append(note, "default "+d)
		}
		if len(note) > 0 {
			head += "  [" + strings.Join(note, ", ") + "]"
		}
		fmt.Fprintf(w, "  %s\n", head)
		for _, line := range wrap(usage, 72) {
			fmt.Fprintf(w, "        %s\n", line)
		}
	}
	for _, name := range flagOrder {
		if name != kindsFlags {
			show(fs.Lookup(name))
			continue
		}
		for _, name := range kindsFlagOrder(c.Backend) {
			show(fs.Lookup(name))
		}
	}
	fs.VisitAll(show)
	fmt.Fprint(w, `
Durations are written 250ms, 5s, 1m30s, 24h.

Exit codes: 0 a normal end (SIGINT or SIGTERM: the pass under way finishes first), or with
--once every listed consumer held or created; 1 with --once when any is not, a withdrawal is
held, the file said nothing, the server could not be used or another replica holds the lease;
2 bad usage or configuration, said in one line.
`)
}

// wrap splits text into lines of at most width characters, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}
