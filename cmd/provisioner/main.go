// Command provisioner is the novox service mesh's PostgreSQL provider: see app.Main.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/novox/postgres-provider/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
