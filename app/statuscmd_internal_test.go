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
	writeStatus(&out, statusDoc{Resource: "postgres", Version: "v1", Role: "acting", Ready: true, Consumers: []*domain.Status{
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
		ServerProblem: "down\nnow", Consumers: []*domain.Status{
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

func TestStatusListsWhoIsLeavingBelow(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	writeStatus(&out, statusDoc{Resource: "postgres", Version: "v1", Role: "acting", Ready: true,
		LastPass:  &passDoc{FileRead: true, WithdrawalsHeld: 2, MassWithdrawal: true},
		Consumers: []*domain.Status{{As: "letta", State: domain.StateApplied, Since: now.Add(-time.Hour)}},
		Leaving: []domain.Leaving{
			{As: "gone", State: domain.LeavingWithdrawn, Since: now.Add(-time.Hour), DropAt: now.Add(23 * time.Hour)},
			{As: "kept", State: domain.LeavingWithdrawn, Since: now.Add(-2 * time.Hour)},
			{As: "going", State: domain.LeavingHeld, WithdrawAt: now.Add(time.Minute)},
			{As: "stuck", State: domain.LeavingFailing, Since: now.Add(-time.Minute), LastError: "stuck: withdraw failed, will retry: no"},
		}}, now)
	is.Equal(out.String(), `provisioner v1 for postgres, acting, ready
withdrawal held: the file no longer lists 2 consumers, more than half of those managed; they are withdrawn once it has stayed unchanged, so put it right now if that is not meant
CONSUMER  STATE    SINCE       CHECKED  NEXT CHECK  DRIFT / LAST ERROR
letta     applied  1h0m0s ago  -        -           -

LEAVING  STATE      SINCE       WITHDRAW AT  DROP DUE    LAST ERROR
gone     withdrawn  1h0m0s ago  -            in 23h0m0s  -
kept     withdrawn  2h0m0s ago  -            -           -
going    held       -           in 1m0s      -           -
stuck    failing    1m0s ago    -            -           stuck: withdraw failed, will retry: no
`)
}

// TestLeavingFieldsFromOutsideStayInTheirCells: a login and an error text the record carries
// are escaped in the LEAVING rows as in the consumers'.
func TestLeavingFieldsFromOutsideStayInTheirCells(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	writeStatus(&out, statusDoc{Resource: "postgres", Version: "v1", Role: "acting", Ready: true, Leaving: []domain.Leaving{
		{As: "evil\nfake\tcell", State: domain.LeavingState("x\x1b[2J"), LastError: "a\rb\x1b]0;title\x07"},
	}}, now)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	is.Equal(len(lines), 5)                                            // the provider, the consumers' header, a blank line, the leaving header, one row
	is.True(strings.HasPrefix(lines[4], `evil\nfake\tcell  x\x1b[2J`)) // the login and the state, escaped, in their cells
	is.True(strings.HasSuffix(lines[4], `a\rb\x1b]0;title\a`))         // the error too
	is.True(!strings.ContainsAny(out.String(), "\x1b\t\r\x07"))        // no raw control byte
}

func TestStatusListsTheArchivesDropsLeftLast(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	writeStatus(&out, statusDoc{Resource: "postgres", Version: "v1", Role: "acting", Ready: true,
		Consumers: []*domain.Status{{As: "letta", State: domain.StateApplied, Since: now.Add(-time.Hour)}},
		Archives: []archiveDoc{{As: "gone", Database: "gone", Name: "gone-gone-16384-20261202T110000Z.dump",
			Place: "/a/gone-gone-16384-20261202T110000Z.dump", Bytes: 1234567, Made: now.Add(-time.Hour)},
			{As: "odd\x1b[2J", Database: "odd", Place: "odd.dump (via --archive-command)", Bytes: 10, Made: now.Add(-2 * time.Hour)}},
	}, now)
	is.True(strings.HasSuffix(out.String(), `
ARCHIVE OF  DATABASE  SIZE    MADE        WHERE
gone        gone      1.2 MB  1h0m0s ago  /a/gone-gone-16384-20261202T110000Z.dump
odd\x1b[2J  odd       10 B    2h0m0s ago  odd.dump (via --archive-command)
`))
}
