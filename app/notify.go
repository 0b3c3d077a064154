package app

import (
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// notifier speaks systemd's notify protocol (sd_notify(3)): a datagram of KEY=value lines to
// the socket NOTIFY_SOCKET names. It is a few lines over a socket, which a dependency would not
// make simpler. Where NOTIFY_SOCKET is not set, it says nothing.
type notifier struct {
	addr *net.UnixAddr
	// watchdog is WATCHDOG_USEC, where it is meant for this process: how often systemd wants
	// WATCHDOG=1 at least.
	watchdog time.Duration
}

func newNotifier(env map[string]string) *notifier {
	n := &notifier{}
	socket := env["NOTIFY_SOCKET"]
	if socket == "" {
		return n
	}
	if strings.HasPrefix(socket, "@") { // an abstract socket
		socket = "\x00" + socket[1:]
	}
	n.addr = &net.UnixAddr{Name: socket, Net: "unixgram"}
	if pid := env["WATCHDOG_PID"]; pid == "" || pid == strconv.Itoa(os.Getpid()) {
		if usec, err := strconv.ParseInt(env["WATCHDOG_USEC"], 10, 64); err == nil && usec > 0 {
			n.watchdog = time.Duration(usec) * time.Microsecond
		}
	}
	return n
}

// send sends state, e.g. "READY=1". A socket that is gone is no reason to stop.
func (n *notifier) send(state string) {
	if n.addr == nil {
		return
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(state))
}
