package app_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/app"
)

// statusOf runs `provisioner status --listen addr`: its exit code, stdout and stderr.
func statusOf(t *testing.T, addr string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := app.Main(context.Background(), []string{"status", "--listen", addr}, nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// serveStatus serves body as /status on loopback, until the test ends; it answers the address.
func serveStatus(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestStatusExitsZeroOnlyWhenReady(t *testing.T) {
	is := is.New(t)
	code, out, _ := statusOf(t, serveStatus(t, `{"resource":"postgres","version":"0.1.0","role":"acting","ready":true,
		"consumers":[{"as":"letta","state":"applied","since":"2026-12-03T12:00:00Z"}],"leaving":[]}`))
	is.Equal(code, 0) // ready
	is.True(strings.HasPrefix(out, "provisioner 0.1.0 for postgres, acting, ready\n"))
	is.True(strings.Contains(out, "\nletta ")) // the table

	code, out, _ = statusOf(t, serveStatus(t, `{"resource":"postgres","version":"0.1.0","role":"acting","ready":false,
		"not_ready":"connect: connection refused","consumers":[],
		"leaving":[{"as":"gone","state":"withdrawn","since":"2026-12-03T11:00:00Z","drop_at":"2026-12-04T11:00:00Z"}]}`))
	is.Equal(code, 1)                                                                                                   // not ready
	is.True(strings.HasPrefix(out, "provisioner 0.1.0 for postgres, acting, not ready: connect: connection refused\n")) // the table is printed all the same, saying why
	is.True(strings.Contains(out, "\nLEAVING ") && strings.Contains(out, "\ngone "))                                    // with who is leaving
}

func TestStatusExitsOneWhereNothingAnswers(t *testing.T) {
	is := is.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	addr := ln.Addr().String()
	is.NoErr(ln.Close()) // a loopback port nothing listens on
	code, out, errOut := statusOf(t, addr)
	is.Equal(code, 1) // no provisioner answers
	is.Equal(out, "")
	is.True(strings.HasPrefix(errOut, "provisioner status: no provisioner answers at "+addr+": ")) // and says where it asked
}

// An --listen that is no address to ask is bad usage (2), said as the request's own error.
func TestStatusExitsTwoOnAnAddressThatCannotBeAsked(t *testing.T) {
	is := is.New(t)
	code, out, errOut := statusOf(t, "bad host:1")
	is.Equal(code, 2)
	is.Equal(out, "")
	is.True(strings.HasPrefix(errOut, `provisioner status: parse "http://bad host:1/status": `))
}
