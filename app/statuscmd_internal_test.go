package app

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
)

func TestStatusIsATable(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	writeStatus(&out, statusDoc{Resource: "postgres", Version: "v1", Role: "acting", Ready: true, Consumers: []domain.Status{
		{As: "letta", State: domain.StateApplied, Since: now.Add(-time.Hour), CheckedAt: now.Add(-10 * time.Second), NextCheck: now.Add(50 * time.Second)},
		{As: "other", State: domain.StateFailing, Since: now.Add(-time.Minute), LastError: "other: create failed, will retry: no"},
	}}, now)
	is.Equal(out.String(), `provisioner v1 for postgres, acting, ready
CONSUMER  STATE    SINCE       CHECKED  NEXT CHECK  DRIFT / LAST ERROR
letta     applied  1h0m0s ago  10s ago  in 50s      -
other     failing  1m0s ago    -        -           other: create failed, will retry: no
`)
}

// TestStatusFieldsFromOutsideStayInTheirCells: the hostile login of issue 19 and a secret path
// holding a newline and a terminal's clear-screen add no row and no raw control byte.
func TestStatusFieldsFromOutsideStayInTheirCells(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	hostile := "evil\n[provisioner:postgres] h0001: no longer in /c.json; withdrawing it from the backend"
	var out strings.Builder
	writeStatus(&out, statusDoc{Resource: "postgres", Version: "v1", Role: "acting", Ready: false, NotReady: "x\x1b[2J",
		ServerProblem: "down\nnow", Consumers: []domain.Status{
			{As: hostile, State: domain.StateFailing, Since: now, LastError: "create failed: login is bad"},
			{As: "letta", State: domain.StateWaitingForSecret, Since: now, LastError: "secret not readable yet (/s/a\nb\x1b[2J\tc): it is empty"},
		}}, now)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	is.Equal(len(lines), 5) // the provider, the server, the header and one row per consumer
	is.Equal(lines[0], `provisioner v1 for postgres, acting, not ready: x\x1b[2J`)
	is.Equal(lines[1], `server: down\nnow`)
	is.True(strings.HasPrefix(lines[3], `evil\n[provisioner:postgres] h0001: no longer in /c.json;`)) // the login, escaped, in its row
	is.True(strings.HasSuffix(lines[4], `secret not readable yet (/s/a\nb\x1b[2J\tc): it is empty`))  // the path too, its tab included
	is.True(!strings.ContainsAny(out.String(), "\x1b\t\r"))                                           // no raw control byte
}
