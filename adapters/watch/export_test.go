package watch

// SetAdd makes add what watches a folder, for a test; it answers the real one.
func (w *Watcher) SetAdd(add func(dir string) error) (real func(dir string) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	real, w.add = w.add, add
	return real
}
