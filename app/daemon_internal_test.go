package app

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/matryer/is"
	"github.com/novox/postgres-provider/adapters/files"

	"github.com/novox/postgres-provider/domain"
)

func TestALoopThatGetsNowhereIsStuck(t *testing.T) {
	is := is.New(t)
	clk := clock.NewMock()
	clk.Set(time.Now())
	h := domain.New(domain.Config{Receives: "/c.json"}, files.New(), clk, nil, nil, nil)
	d := newDaemon(Config{Every: 5 * time.Second, HoldsTimeout: 30 * time.Second}, h, nil, nil, nil, &notifier{})
	is.Equal(d.stuckAfter(), 5*time.Second+2*time.Minute+30*time.Second+30*time.Second) // derived from --every and the timeouts
	_, stuck := d.stuck(clk.Now().Add(time.Minute))
	is.True(!stuck) // a minute without a step is a long pass, not a stuck one
	idle, stuck := d.stuck(clk.Now().Add(4 * time.Minute))
	is.True(stuck) // four is
	is.Equal(idle, 4*time.Minute)
}

func TestTheNotifierSpeaksSystemdsProtocol(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	is.NoErr(err)
	defer conn.Close()
	n := newNotifier(map[string]string{"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"})
	is.Equal(n.watchdog, 2*time.Second) // systemd's interval
	n.send("READY=1")
	buf := make([]byte, 64)
	is.NoErr(conn.SetReadDeadline(time.Now().Add(10 * time.Second)))
	k, err := conn.Read(buf)
	is.NoErr(err)
	is.Equal(string(buf[:k]), "READY=1")

	is.Equal(newNotifier(map[string]string{"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1", "WATCHDOG_PID": "1"}).watchdog, time.Duration(0)) // another process's
	newNotifier(map[string]string{}).send("READY=1")                                                                                      // no socket: nothing, no error
}
