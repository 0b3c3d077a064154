package watch_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/watch"
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
