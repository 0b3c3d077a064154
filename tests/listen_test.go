package tests

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/novox/postgres-provider/tests/poll"
)

// A free port (freeAddr) is free when it is chosen, not when the provisioner binds it: on a
// machine where other test binaries start servers and provisioners too, another process may
// take it in between. The provisioner then exits, and its /metrics would be read from whoever
// took the port (a stranger's leader counted as ours). start waits until its process holds the
// port, and starts it again on another where a stranger took it.

// bound waits until p's process listens on its address, or has exited; false where it exited
// because the address was taken.
func (p *proc) bound() bool {
	_, port, _ := net.SplitHostPort(p.listen)
	bound := true // not bound within a minute: the test sees what it sees
	poll.Within(time.Minute, func() bool {
		select {
		case <-p.g.Exited():
			bound = !strings.Contains(p.stderr.String(), "address already in use")
			return true
		default:
		}
		held, known := listens(p.g.Pid(), port)
		return held || !known
	})
	return bound
}

// listens reports whether process pid holds a listening TCP socket on 127.0.0.1:port; known is
// false where this system does not say (no /proc).
func listens(pid int, port string) (held, known bool) {
	n, err := strconv.Atoi(port)
	if err != nil {
		return false, false
	}
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false, false
	}
	local, inode := fmt.Sprintf("0100007F:%04X", n), ""
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" {
			inode = f[9]
		}
	}
	if inode == "" {
		return false, true
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, true
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name())); err == nil && target == "socket:["+inode+"]" {
			return true, true
		}
	}
	return false, true
}
