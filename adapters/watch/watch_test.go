package watch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/watch"
	"github.com/novox/postgres-provider/tests/poll"
)

// woken waits for a wake-up; the limit guards against a hang, it is not a timing.
func woken(w *watch.Watcher) bool {
	select {
	case <-w.Wake():
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

func TestReplacingTheFileByRenameWakes(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "contributions.json")
	is.NoErr(os.WriteFile(file, []byte("{}"), 0o600))
	w, err := watch.New(20*time.Millisecond, nil)
	is.NoErr(err)
	defer w.Close()
	w.Watch([]string{file})
	is.True(woken(w)) // a folder newly watched wakes: what changed before was not seen

	tmp := filepath.Join(dir, ".contributions.json.tmp")
	is.NoErr(os.WriteFile(tmp, []byte(`{"given": []}`), 0o600))
	is.NoErr(os.Rename(tmp, file))
	is.True(woken(w)) // the rename woke the loop

	select {
	case <-w.Wake():
		t.Fatal("one burst of changes woke twice")
	default: // a burst is one wake-up
	}
}

func TestSecretFolderIsWatchedAndDroppedFolderIsNot(t *testing.T) {
	is := is.New(t)
	files, secrets := t.TempDir(), t.TempDir()
	w, err := watch.New(time.Millisecond, nil)
	is.NoErr(err)
	defer w.Close()
	w.Watch([]string{filepath.Join(files, "c.json"), filepath.Join(secrets, "letta")})
	is.True(woken(w)) // the new folders
	is.NoErr(os.WriteFile(filepath.Join(secrets, "letta"), []byte("pw"), 0o600))
	is.True(woken(w)) // a secret written after the file wakes the loop

	w.Watch([]string{filepath.Join(files, "c.json")}) // dropping a folder adds none: no wake-up
	select {
	case <-w.Wake():
		t.Fatal("dropping a folder woke the loop")
	default:
	}
	is.NoErr(os.WriteFile(filepath.Join(files, "c.json"), []byte("{}"), 0o600))
	is.True(woken(w)) // the file's folder still wakes
}

func TestMissingFolderIsSaidAndTriedAgain(t *testing.T) {
	is := is.New(t)
	root := t.TempDir()
	var said []error
	w, err := watch.New(time.Millisecond, func(err error) { said = append(said, err) })
	is.NoErr(err)
	defer w.Close()
	later := filepath.Join(root, "later")
	w.Watch([]string{filepath.Join(later, "c.json")})
	w.Watch([]string{filepath.Join(later, "c.json")})
	is.Equal(len(said), 1) // a folder that does not exist is said, once
	is.NoErr(os.Mkdir(later, 0o700))
	w.Watch([]string{filepath.Join(later, "c.json")}) // tried again
	is.True(woken(w))                                 // and, added now, wakes
	is.NoErr(os.WriteFile(filepath.Join(later, "c.json"), []byte("{}"), 0o600))
	is.True(woken(w)) // and watched once it exists
}

// TestUnchangedListIsNotWatchedAgain: a list handed over again as it was adds nothing and
// asks inotify nothing; a changed one adds only its new folders.
func TestUnchangedListIsNotWatchedAgain(t *testing.T) {
	is := is.New(t)
	a, b := t.TempDir(), t.TempDir()
	w, err := watch.New(time.Millisecond, nil)
	is.NoErr(err)
	defer w.Close()
	var adds []string
	real := w.SetAdd(nil)
	w.SetAdd(func(dir string) error { adds = append(adds, dir); return real(dir) })
	files := []string{filepath.Join(a, "c.json"), filepath.Join(a, "letta")}
	w.Watch(files)
	w.Watch(files)
	w.Watch(append([]string(nil), files...))
	is.Equal(adds, []string{a}) // one folder, added once
	w.Watch(append(files, filepath.Join(b, "sol")))
	is.Equal(adds, []string{a, b}) // the changed list adds its new folder only
}

// TestInotifyLimitIsSaidOnce: folders beyond inotify's limit are said once, with the sysctl that
// raises it, and not tried again on every pass; the folders within it are watched.
func TestInotifyLimitIsSaidOnce(t *testing.T) {
	is := is.New(t)
	root := t.TempDir()
	var said []string
	w, err := watch.New(time.Millisecond, func(err error) { said = append(said, err.Error()) })
	is.NoErr(err)
	defer w.Close()
	real := w.SetAdd(nil)
	room, tries := 2, 0
	w.SetAdd(func(dir string) error {
		tries++
		if room == 0 {
			return syscall.ENOSPC
		}
		room--
		return real(dir)
	})
	var files []string
	for i := range 5 {
		dir := filepath.Join(root, fmt.Sprint(i))
		is.NoErr(os.Mkdir(dir, 0o700))
		files = append(files, filepath.Join(dir, "secret"))
	}
	w.Watch(files)
	is.Equal(len(said), 1)                                            // said once
	is.True(strings.Contains(said[0], "fs.inotify.max_user_watches")) // with the sysctl
	is.True(strings.Contains(said[0], "3 folder(s) not watched"))     // and how many
	is.True(woken(w))                                                 // the folders within the limit were added
	tries = 0
	for range 3 {
		w.Watch(files)
	}
	is.Equal(tries, 0)     // not tried again while the list is the same
	is.Equal(len(said), 1) // nor said again
	is.NoErr(os.WriteFile(files[0], []byte("pw"), 0o600))
	is.True(woken(w)) // a watched folder still wakes the loop
}

// A secret's folder removed and made again (a consumer's secrets recreated) is watched again:
// Complete says the watch is not whole from the removal until the next Watch adds it back, and
// a secret written in the new folder wakes the loop.
func TestAFolderRemovedAndMadeAgainIsWatchedAgain(t *testing.T) {
	is := is.New(t)
	root := t.TempDir()
	folder := filepath.Join(root, "letta")
	is.NoErr(os.Mkdir(folder, 0o700))
	secret := filepath.Join(folder, "secret")
	w, err := watch.New(time.Millisecond, nil)
	is.NoErr(err)
	defer w.Close()
	is.True(!w.Complete()) // no list yet
	w.Watch([]string{secret})
	is.True(woken(w))
	is.True(w.Complete())

	is.NoErr(os.RemoveAll(folder))
	is.True(woken(w))                                                                     // the removal wakes
	poll.Eventually(t, "not whole", 10*time.Second, func() bool { return !w.Complete() }) // and the watch is not whole
	is.NoErr(os.Mkdir(folder, 0o700))
	w.Watch([]string{secret}) // the same list: the folder added back
	is.True(woken(w))
	is.True(w.Complete())
	is.NoErr(os.WriteFile(secret, []byte("pw"), 0o600))
	is.True(woken(w)) // a secret written there wakes the loop
}
