package app

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/novox/postgres-provider/adapters/logger"
	"github.com/novox/postgres-provider/ports"
)

// restoreCommand is `provisioner restore LOGIN [--from FILE] FLAGS`: the consumer's database
// made again from the archive its drop left, with the daemon's flags and variables (as plan
// takes them). 0 restored, 1 refused or failed, 2 bad usage.
func restoreCommand(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
			fmt.Fprint(stdout, restoreUsageText)
			return 0
		}
		fmt.Fprintln(stderr, "provisioner restore: want the consumer's login first (see provisioner restore --help)")
		return 2
	}
	as := args[0]
	from, rest, err := valueOf("from", args[1:])
	if err != nil {
		fmt.Fprintf(stderr, "provisioner restore: %v (see provisioner restore --help)\n", err)
		return 2
	}
	cfg, err := parse(rest, env)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "provisioner restore: %s (see provisioner restore --help)\n", redact(err.Error(), cfg.Backend))
		return 2
	case cfg.Help:
		fmt.Fprint(stdout, restoreUsageText)
		return 0
	}
	log, err := logOf(stderr, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner restore: %v\n", err)
		return 2
	}
	backend, err := backendOf(cfg, log, false)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner restore: %s\n", redact(err.Error(), cfg.Backend))
		return 2
	}
	defer backend.Close()
	r, ok := backend.(ports.Archiving)
	if !ok {
		fmt.Fprintln(stderr, "provisioner restore: this backend keeps no archives")
		return 2
	}
	said, err := r.Restore(ctx, as, from)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner restore: %s\n", logger.Escape(redact(err.Error(), cfg.Backend)))
		return 1
	}
	fmt.Fprintln(stdout, logger.Escape(said))
	return 0
}

// valueOf takes the flag --name VALUE (or --name=VALUE) out of args.
func valueOf(name string, args []string) (value string, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return value, append(rest, args[i:]...), nil
		}
		flagName, v, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || flagName != name {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("flag needs an argument: --%s", name)
			}
			i++
			v = args[i]
		}
		value = v
	}
	return value, rest, nil
}

const restoreUsageText = `Usage: provisioner restore LOGIN [--from FILE] --receives PATH [flags]

Makes the database of a consumer that was dropped (--on-withdraw drop) again from the archive
its drop left (--archive-to, or --archive-command with --restore-command), its checksum checked
first: owned by its role as before, its extensions made as the provider makes them, its
settings applied. Its login stays withdrawn: when the mesh lists the consumer again, the
provider takes it up from its record. --from FILE restores from a copy of the archive, which
must be one the record knows (by its SHA-256).

It takes the daemon's flags and variables. It refuses where the consumer is active or its
database exists, and says what to do. Exit codes: 0 restored, 1 refused or failed, 2 bad usage.
`
