package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

const (
	pkgName = "novox-provisioner"
	pkgUser = "novox-provisioner"
	pkgUnit = "/lib/systemd/system/novox-provisioner.service"
	pkgBin  = "/usr/bin/provisioner"
	pkgEnv  = "/etc/novox-provisioner/provisioner.env"
)

// TestTheDebianPackageInstallsRunsAndPurges builds the package as make dist does, for this
// machine's architecture, installs it with dpkg, checks its unit with systemd-analyze verify,
// runs the installed binary as the package's user for one --once pass against a throwaway
// server, and purges it: the user, the group and every file it brought are gone. It changes
// the machine, so it runs only as root, and only where the package is not installed already.
func TestTheDebianPackageInstallsRunsAndPurges(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: installing a package takes a build and dpkg")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: installing the Debian package with dpkg -i needs root (make dist builds it anyway)")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "dpkg-query", "make", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here: the Debian package cannot be installed on this machine", tool)
		}
	}
	if installed(pkgName) {
		t.Skipf("%s is installed on this machine already: not this test's to purge", pkgName)
	}
	if exists("passwd", pkgUser) || exists("group", pkgUser) {
		t.Skipf("a user or group %s exists here already: not this test's to remove", pkgUser)
	}
	is := is.New(t)
	began := time.Now()

	// Build it as a release is built: make dist, this architecture only.
	dist := filepath.Join(serverDir(t), "dist")
	out, err := pgserver.RunGroup(exec.Command("make", "-C", "..", "--no-print-directory", "dist", "DIST="+dist, "ARCHES="+runtime.GOARCH), 10*time.Minute)
	is.NoErr(err) // make dist
	debs, _ := filepath.Glob(filepath.Join(dist, pkgName+"_*_"+runtime.GOARCH+".deb"))
	is.Equal(len(debs), 1) // one package for this architecture
	deb := debs[0]
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	is.NoErr(err)
	is.True(strings.Contains(string(sums), "  "+filepath.Base(deb)+"\n")) // its checksum listed
	t.Logf("make dist (%s): %s", time.Since(began).Round(time.Second), strings.TrimSpace(string(out)))

	// What it will bring: none of it may be here before, all of it must be gone after.
	listing, err := exec.Command("dpkg-deb", "--contents", deb).Output()
	is.NoErr(err)
	var brought []string
	for _, line := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		fields := strings.Fields(line)
		if path := strings.TrimPrefix(fields[len(fields)-1], "."); !strings.HasSuffix(path, "/") {
			brought = append(brought, path)
		}
	}
	for _, want := range []string{pkgBin, pkgUnit, pkgEnv} {
		is.True(slices.Contains(brought, want)) // the binary, the unit, the environment file
	}
	for _, path := range append(brought, "/etc/novox-provisioner") {
		if _, err := os.Lstat(path); err == nil {
			t.Skipf("%s is on this machine already: the package would overwrite what is not this test's", path)
		}
	}

	t.Cleanup(func() { // whatever happens, the machine as it was
		if installed(pkgName) {
			if out, err := exec.Command("dpkg", "--purge", pkgName).CombinedOutput(); err != nil {
				t.Errorf("dpkg --purge %s: %v\n%s", pkgName, err, out)
			}
		}
	})
	out, err = exec.Command("dpkg", "--install", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg --install: %v\n%s", err, out)
	}
	is.True(installed(pkgName))
	is.True(exists("passwd", pkgUser)) // the system user, made by postinst
	account := getent(t, "passwd", pkgUser)
	is.True(strings.HasSuffix(account, ":/nonexistent:/usr/sbin/nologin")) // no home, no shell
	uid, _ := strconv.Atoi(strings.Split(account, ":")[2])
	gid, _ := strconv.Atoi(strings.Split(account, ":")[3])
	is.True(uid > 0 && uid < 1000) // a system user
	info, err := os.Stat(pkgEnv)
	is.NoErr(err)
	is.Equal(info.Mode().Perm(), os.FileMode(0o600))      // the password's file: root's alone
	is.Equal(info.Sys().(*syscall.Stat_t).Uid, uint32(0)) // systemd reads it as root
	version, err := exec.Command(pkgBin, "--version").Output()
	is.NoErr(err)
	is.True(strings.HasPrefix(string(version), "provisioner "+strings.TrimSuffix(strings.TrimPrefix(filepath.Base(deb), pkgName+"_"), "_"+runtime.GOARCH+".deb")+" (commit ")) // the release the package is named for

	// The unit, as systemd reads it: anything it says (an unknown key, a missing binary or
	// user) is a fault.
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("no systemd-analyze here (Debian's systemd package): the unit is not verified")
	} else {
		out, err := exec.Command("systemd-analyze", "verify", filepath.Base(pkgUnit)).CombinedOutput()
		is.NoErr(err)
		is.Equal(strings.TrimSpace(string(out)), "") // systemd-analyze verify: nothing to say
	}

	// One pass of the installed binary, as the package's user, which may read the file and
	// the secrets through its group, as README's quickstart says.
	url := pgserver.Shared(t).URL
	m := &mesh{t: t, dir: filepath.Join(serverDir(t), "mesh"), resource: "pg-" + randomHex(4)}
	m.file = filepath.Join(m.dir, "contributions.json")
	is.NoErr(os.Mkdir(m.dir, 0o750))
	c := consumer{as: name("pkg"), password: randomHex(8)}
	m.give(c)
	for _, path := range []string{m.dir, m.file, m.secret(c.as)} {
		is.NoErr(os.Chown(path, 0, gid))
	}
	is.NoErr(os.Chmod(m.file, 0o640))
	is.NoErr(os.Chmod(m.secret(c.as), 0o640))
	once := exec.Command(pkgBin, m.args("--once", "--database-url", url)...)
	once.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err = pgserver.RunGroup(once, onceLimit)
	is.NoErr(err)                                                                              // exit 0: every consumer created
	is.Equal(strings.TrimSpace(string(out)), "[provisioner:"+m.resource+"] "+c.as+": created") // and nothing to say but the audit line
	is.True(c.logsIn(t, url))                                                                  // the consumer's login works
	is.NoErr(query(t, url, "", "DROP DATABASE "+c.as))
	is.NoErr(query(t, url, "", "DROP ROLE "+c.as))

	out, err = exec.Command("dpkg", "--purge", pkgName).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg --purge: %v\n%s", err, out)
	}
	is.True(!installed(pkgName))
	is.True(!exists("passwd", pkgUser)) // the user gone
	is.True(!exists("group", pkgUser))  // its group too
	for _, path := range append(brought, "/etc/novox-provisioner") {
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s is still here after the purge", path)
		}
	}
	t.Logf("built, installed, verified, run and purged in %s", time.Since(began).Round(time.Second))
}

// installed is whether dpkg knows pkg as installed (or half-installed, or with its
// configuration left).
func installed(pkg string) bool {
	out, err := exec.Command("dpkg-query", "--show", "--showformat=${db:Status-Status}", pkg).Output()
	return err == nil && strings.TrimSpace(string(out)) != "" && strings.TrimSpace(string(out)) != "not-installed"
}

// exists is whether the database (passwd, group) names key.
func exists(database, key string) bool {
	return exec.Command("getent", database, key).Run() == nil
}

func getent(t *testing.T, database, key string) string {
	t.Helper()
	out, err := exec.Command("getent", database, key).Output()
	is.New(t).NoErr(err)
	return strings.TrimSpace(string(out))
}
