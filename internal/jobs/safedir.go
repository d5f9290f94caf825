package jobs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// FileMode is the mode of the journal and the checkpoint, set explicitly
// whatever the umask: the service's group may read them (docs/jobs.md).
const FileMode = 0o640

// safeDir is the accounting directory, opened once after its owner and
// mode were checked. Every file in it is opened, renamed and removed
// relative to that open directory and without following a symbolic link,
// so neither a link planted in it nor the directory being replaced can
// make gpuwatch write elsewhere.
type safeDir struct {
	path string
	f    *os.File
}

// errSymlink is returned for a symbolic link where a file of the journal
// or checkpoint should be.
var errSymlink = fmt.Errorf("is a symbolic link: gpuwatch does not follow links in the accounting directory; remove it (%w)", syscall.ELOOP)

// errNotRegular is returned for a journal or checkpoint path that holds
// something other than a regular file (a directory, a FIFO, a device).
var errNotRegular = errors.New("not a regular file")

// sync makes renames and creations in the directory durable.
func (d *safeDir) sync() error { return d.f.Sync() }

func (d *safeDir) close() error { return d.f.Close() }

// writeFile replaces name with data atomically and durably: a new
// temporary file, synced, renamed over name, and the directory synced.
func (d *safeDir) writeFile(name string, data []byte) error {
	tmp := fmt.Sprintf(".%s.%d.tmp", name, os.Getpid())
	_ = d.remove(tmp) // left by a crash of this PID's predecessor: it is ours to replace
	f, err := d.open(tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL)
	if err != nil {
		return err
	}
	defer d.remove(tmp) //nolint:errcheck // after a successful rename there is nothing left to remove
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := d.rename(tmp, name); err != nil {
		return err
	}
	return d.sync()
}
