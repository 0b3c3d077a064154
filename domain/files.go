package domain

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// fileID is what identifies one state of a file without reading it: a file rewritten in place,
// replaced by rename, or touched, has another.
type fileID struct {
	size  int64
	mtime int64 // its modification time, in nanoseconds since 1970
	inode uint64
	// ctime is when the file's inode last changed, which every write does and no writer can
	// set back (as touch and rsync set mtime); zero where the filesystem does not say.
	ctime int64
}

// idOf is the identity of name in the state fi describes.
func (h *Harness) idOf(name string, fi os.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	id.inode, id.ctime = h.fs.Identity(name, fi)
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
	var raw []byte
	id, err := h.stable(name, max, func(f io.Reader, size int64) error {
		var err error
		raw, err = readAll(name, f, make([]byte, 0, size+1), max)
		if err == nil && int64(len(raw)) != size {
			err = errChanged
		}
		return err
	})
	return raw, id, err
}

// digestStable is readStable's digest of the file, read through a small buffer: the file is
// not held in memory.
func (h *Harness) digestStable(name string, max int64) ([sha256.Size]byte, fileID, error) {
	var digest [sha256.Size]byte
	id, err := h.stable(name, max, func(f io.Reader, size int64) error {
		sum := sha256.New()
		n, err := io.CopyBuffer(sum, io.LimitReader(f, max+1), h.copyBuf[:])
		switch {
		case err != nil:
			return err
		case n > max:
			return errTooLarge{name, max}
		case n != size:
			return errChanged
		}
		sum.Sum(digest[:0])
		return nil
	})
	return digest, id, err
}

// stable opens name, checks it is a regular file of at most max bytes, lets read have it, and
// checks that it did not change meanwhile; it answers its identity.
func (h *Harness) stable(name string, max int64, read func(f io.Reader, size int64) error) (fileID, error) {
	f, err := h.fs.Open(name)
	if err != nil {
		return fileID{}, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return fileID{}, err
	}
	if err := regular(name, before, max); err != nil {
		return fileID{}, err
	}
	id := h.idOf(name, before) // now: a FileInfo may follow the file
	if err := read(f, id.size); err != nil {
		return fileID{}, err
	}
	after, err := h.fs.Stat(name)
	if err != nil {
		return fileID{}, err
	}
	if h.idOf(name, after) != id {
		return fileID{}, errChanged
	}
	return id, nil
}

// readAll reads f to its end into buf, and refuses more than max bytes.
func readAll(name string, f io.Reader, buf []byte, max int64) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case int64(len(buf)) > max:
			return nil, errTooLarge{name, max}
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
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
