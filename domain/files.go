package domain

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// fileID is what identifies one state of a file without reading it: a file rewritten in place,
// replaced by rename, or touched, has another.
type fileID struct {
	size  int64
	mtime time.Time
	inode uint64
}

func idOf(fi os.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.inode = uint64(st.Ino)
	}
	return id
}

// errChanged is a file that changed while it was read: what was read may be half of one
// version and half of another.
var errChanged = errors.New("it changed while it was read")

// errTooLarge is a file larger than the loop reads.
type errTooLarge struct {
	name string
	max  int64
}

func (e errTooLarge) Error() string { return fmt.Sprintf("%s is larger than %d bytes", e.name, e.max) }

// readStable reads a whole regular file of at most max bytes, and answers it with its identity
// when it was read. What is not a regular file (a FIFO the mesh never writes would stall the
// loop) is refused once opened, which the Filesystem does without waiting. A file whose size,
// time or inode changed while it was read is refused with errChanged.
func (h *Harness) readStable(name string, max int64) ([]byte, fileID, error) {
	f, err := h.fs.Open(name)
	if err != nil {
		return nil, fileID{}, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return nil, fileID{}, err
	}
	if err := regular(name, before, max); err != nil {
		return nil, fileID{}, err
	}
	raw, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fileID{}, err
	}
	if int64(len(raw)) > max {
		return nil, fileID{}, errTooLarge{name, max}
	}
	after, err := h.fs.Stat(name)
	if err != nil {
		return nil, fileID{}, err
	}
	id := idOf(before)
	if idOf(after) != id || int64(len(raw)) != id.size {
		return nil, fileID{}, errChanged
	}
	return raw, id, nil
}

// regular refuses what is not a regular file of at most max bytes.
func regular(name string, fi os.FileInfo, max int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file but %s", name, modeName(fi.Mode()))
	}
	if fi.Size() > max {
		return errTooLarge{name, max}
	}
	return nil
}

func modeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	default:
		return "a " + m.Type().String()
	}
}
