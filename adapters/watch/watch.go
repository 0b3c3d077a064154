// Package watch turns changes to files into wake-ups for the reconcile loop: it watches the
// folders of the files it is told about (the mesh replaces the contributions file by rename,
// and writes secrets after it) and delivers one wake-up per burst of changes.
package watch

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher watches folders and wakes its channel, debounced.
type Watcher struct {
	w        *fsnotify.Watcher
	wake     chan struct{}
	debounce time.Duration
	errs     func(error)
	add      func(dir string) error // w.w.Add; a test's stand-in

	mu      sync.Mutex
	files   []string        // the list last given to Watch, as it was
	folders map[string]bool // the folders watched
	missing map[string]bool // folders that could not be watched but may be later, said once each
	full    map[string]bool // folders not watched because inotify's limit was met
	limit   bool            // the limit was met, and said
	done    chan struct{}
}

// New starts a Watcher that delivers on Wake at most once per debounce after changes stop. errs
// is told, once each, of folders that cannot be watched, and of the watcher's own errors; it
// may be nil.
func New(debounce time.Duration, errs func(error)) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if errs == nil {
		errs = func(error) {}
	}
	w := &Watcher{w: fw, wake: make(chan struct{}, 1), debounce: debounce, errs: errs, add: fw.Add,
		folders: map[string]bool{}, missing: map[string]bool{}, full: map[string]bool{}, done: make(chan struct{})}
	go w.loop()
	return w, nil
}

// Wake delivers a value after a burst of changes in a watched folder.
func (w *Watcher) Wake() <-chan struct{} { return w.wake }

// Watch makes the watched folders those of files: new ones are added, ones no longer needed
// are dropped. It costs a comparison while files is what it was on the last call; the folders
// are worked out again only when it changed. A folder that does not exist yet is tried again
// on the next call. Folders beyond inotify's limit of watches are said once, with the sysctl
// that raises it, and left to the timer until the list changes. Adding a folder wakes the
// loop: what changed there between the loop's last read and now was not seen.
func (w *Watcher) Watch(files []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.Equal(files, w.files) {
		if len(w.missing) > 0 && w.addAll(mapsKeys(w.missing)) {
			w.poke()
		}
		return
	}
	w.files = slices.Clone(files)
	want := make(map[string]bool, len(files))
	dirs := make([]string, 0, len(files))
	for _, f := range files {
		dir := filepath.Dir(filepath.Clean(f))
		if !want[dir] {
			want[dir] = true
			dirs = append(dirs, dir)
		}
	}
	for dir := range w.folders {
		if !want[dir] {
			_ = w.w.Remove(dir)
			delete(w.folders, dir)
		}
	}
	for _, m := range []map[string]bool{w.missing, w.full} {
		for dir := range m {
			if !want[dir] {
				delete(m, dir)
			}
		}
	}
	added := w.addAll(slices.DeleteFunc(dirs, func(dir string) bool { return w.folders[dir] }))
	if len(w.full) == 0 {
		w.limit = false // said again should it be met again
	}
	if added {
		w.poke()
	}
}

// addAll watches each of dirs, and reports whether it added any.
func (w *Watcher) addAll(dirs []string) bool {
	added, full := false, 0
	for _, dir := range dirs {
		err := w.add(dir)
		switch {
		case err == nil:
			delete(w.missing, dir)
			delete(w.full, dir)
			w.folders[dir] = true
			added = true
		case errors.Is(err, syscall.ENOSPC):
			// inotify's limit of watches: every other folder would meet it too.
			delete(w.missing, dir)
			w.full[dir] = true
			full++
		default:
			if !w.missing[dir] {
				w.errs(fmt.Errorf("watch %s (passes still run on the timer): %w", dir, err))
			}
			w.missing[dir] = true
		}
	}
	if full > 0 && !w.limit {
		w.limit = true
		w.errs(fmt.Errorf("watch: inotify's limit of watches is met (sysctl fs.inotify.max_user_watches): %d folder(s) "+
			"not watched, for which passes run on the timer only", len(w.full)))
	}
	return added
}

func mapsKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// poke delivers a wake-up unless one is already waiting.
func (w *Watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Complete is whether a change to any file of the list last given to Watch wakes the loop:
// each of their folders is watched (none missing, none beyond inotify's limit, none removed
// since), and Watch was given a list.
func (w *Watcher) Complete() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files != nil && len(w.missing) == 0 && len(w.full) == 0
}

// gone notes that a watched folder was removed or renamed, which ends its watch: it is missing
// until Watch adds it again.
func (w *Watcher) gone(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.folders[dir] {
		delete(w.folders, dir)
		w.missing[dir] = true
	}
}

// Close stops watching.
func (w *Watcher) Close() error {
	err := w.w.Close()
	<-w.done
	return err
}

func (w *Watcher) loop() {
	defer close(w.done)
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				w.gone(filepath.Clean(ev.Name)) // where it is a watched folder itself
			}
			if timer == nil {
				timer = time.NewTimer(w.debounce)
			} else {
				timer.Reset(w.debounce)
			}
			fire = timer.C
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			w.errs(err)
			w.poke() // events may be lost (the queue overflowed): the loop looks at every file again
		case <-fire:
			fire = nil
			w.poke()
		}
	}
}
