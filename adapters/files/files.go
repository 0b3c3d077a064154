// Package files is the filesystem the reconcile loop reads the contributions file and secrets
// through: the operating system's, read-only, and opening without ever waiting for a writer.
package files

import (
	"os"
	"syscall"

	"github.com/spf13/afero"

	"github.com/novox/postgres-provider/ports"
)

// FS is the operating system's filesystem, read-only. Open does not block on a FIFO: the loop
// refuses what is not a regular file, and one swapped in after it looked must not stall it.
type FS struct {
	afero.Fs
}

var _ ports.Filesystem = FS{}

// New returns the operating system's filesystem, read-only.
func New() FS { return FS{afero.NewReadOnlyFs(afero.NewOsFs())} }

// Open opens name for reading, without blocking.
func (f FS) Open(name string) (afero.File, error) {
	return f.Fs.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// Identity is the inode fi names and when it last changed, from the system's stat.
func (FS) Identity(_ string, fi os.FileInfo) (inode uint64, changed int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return uint64(st.Ino), ctimeOf(st)
}
