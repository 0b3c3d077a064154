// Package watch turns changes to files into wake-ups for the reconcile loop: it watches the
// folders of the files it is told about (the mesh replaces the contributions file by rename,
// and writes secrets after it) and delivers one wake-up per burst of changes.
package watch

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher watches folders and wakes its channel, debounced.
type Watcher struct {
	w        *fsnotify.Watcher
	wake     chan struct{}
	debounce time.Duration
	errs     func(error)

	mu      sync.Mutex
	folders []string
	failed  map[string]bool // folders that could not be watched, said once each
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
	w := &Watcher{w: fw, wake: make(chan struct{}, 1), debounce: debounce, errs: errs, failed: map[string]bool{}, done: make(chan struct{})}
	go w.loop()
	return w, nil
}

// Wake delivers a value after a burst of changes in a watched folder.
func (w *Watcher) Wake() <-chan struct{} { return w.wake }

// Watch makes the watched folders those of files: new ones are added, ones no longer needed
// are dropped. A folder that does not exist yet is tried again on the next call. Adding a
// folder wakes the loop: what changed there between the loop's last read and now was not seen.
func (w *Watcher) Watch(files []string) {
	want := make([]string, 0, len(files))
	for _, f := range files {
		dir := filepath.Dir(filepath.Clean(f))
		if !slices.Contains(want, dir) {
			want = append(want, dir)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, dir := range w.folders {
		if !slices.Contains(want, dir) {
			_ = w.w.Remove(dir)
		}
	}
	watching, added := want[:0:0], false
	for _, dir := range want {
		if slices.Contains(w.folders, dir) {
			watching = append(watching, dir)
			continue
		}
		if err := w.w.Add(dir); err != nil {
			if !w.failed[dir] {
				w.errs(fmt.Errorf("watch %s (passes still run on the timer): %w", dir, err))
			}
			w.failed[dir] = true
			continue
		}
		delete(w.failed, dir)
		watching = append(watching, dir)
		added = true
	}
	w.folders = watching
	if added {
		w.poke()
	}
}

// poke delivers a wake-up unless one is already waiting.
func (w *Watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
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
		case _, ok := <-w.w.Events:
			if !ok {
				return
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
		case <-fire:
			fire = nil
			w.poke()
		}
	}
}
