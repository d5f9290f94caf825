//go:build !windows

package jobs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// openSafeDir opens (creating it if missing, 0750) the accounting
// directory and checks it as sshd's StrictModes does: see checkDirTrust.
func openSafeDir(path string) (*safeDir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := checkDirTrust(abs, &st, true); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := checkAncestors(abs); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &safeDir{path: abs, f: f}, nil
}

// checkDirTrust refuses a directory that someone other than this process's
// user and root could change: owned by another user, writable by others,
// or writable by a group that is not this process's. Ancestors (own false)
// may be writable by others when sticky (/tmp): nobody else can then
// rename what they hold.
func checkDirTrust(path string, st *unix.Stat_t, own bool) error {
	euid := uint32(os.Geteuid())
	mode := st.Mode & 0o7777
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory", path)
	case st.Uid != euid && st.Uid != 0:
		return fmt.Errorf("%s belongs to uid %d, not to this process's user (uid %d) or root: chown it to the user gpuwatch runs as", path, st.Uid, euid)
	case !own && mode&unix.S_ISVTX != 0:
		return nil
	case mode&0o002 != 0:
		return fmt.Errorf("%s is writable by every user (mode %04o): chmod o-w it (0750 is what gpuwatch creates)", path, mode)
	case mode&0o020 != 0 && (own && st.Gid != uint32(os.Getegid()) || !own && st.Gid != 0):
		return fmt.Errorf("%s is writable by group %d (mode %04o): chmod g-w it (0750 is what gpuwatch creates)", path, st.Gid, mode)
	}
	return nil
}

// checkAncestors checks every directory above path as checkDirTrust does:
// a user who can rename one of them can swap the whole tree.
func checkAncestors(path string) error {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return err
		}
		if err := checkDirTrust(dir, &st, false); err != nil {
			return fmt.Errorf("a parent of %s: %w", path, err)
		}
		if dir == "/" || dir == "." {
			return nil
		}
	}
}

// open opens name in the directory without following a link and without
// blocking on a FIFO, and refuses anything but a regular file. A file
// opened for writing must belong to this process's user and have one
// link (a hard link to another file would be written through), and gets
// FileMode.
func (d *safeDir) open(name string, flags int) (*os.File, error) {
	fd, err := unix.Openat(int(d.f.Fd()), name, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, FileMode)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			err = errSymlink
		}
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	if err := checkOpened(f, name, flags&(unix.O_WRONLY|unix.O_RDWR) != 0); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func checkOpened(f *os.File, name string, write bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &os.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	if !write {
		return nil
	}
	switch {
	case st.Uid != uint32(os.Geteuid()):
		return fmt.Errorf("%s belongs to uid %d, not to this process's user: gpuwatch writes only its own files", name, st.Uid)
	case st.Nlink != 1:
		return fmt.Errorf("%s has %d hard links: gpuwatch writes only files with one", name, st.Nlink)
	}
	if st.Mode&0o7777 != FileMode {
		return f.Chmod(FileMode)
	}
	return nil
}

// rename renames old to new in the directory (neither followed).
func (d *safeDir) rename(old, new string) error {
	if err := unix.Renameat(int(d.f.Fd()), old, int(d.f.Fd()), new); err != nil {
		return &os.LinkError{Op: "rename", Old: old, New: new, Err: err}
	}
	return nil
}

// remove removes the file name; a directory in its place is an error.
func (d *safeDir) remove(name string) error {
	if err := unix.Unlinkat(int(d.f.Fd()), name, 0); err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	return nil
}

// kind says what name is (without following a link): 0 when absent.
func (d *safeDir) kind(name string) (uint32, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(d.f.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	return st.Mode & unix.S_IFMT, nil
}

// lock takes the directory's lock for one writer, held until close.
func (d *safeDir) lock() error {
	return unix.Flock(int(d.f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}

// mkdir makes name in the directory (EEXIST when it is there).
func (d *safeDir) mkdir(name string, mode uint32) error {
	return unix.Mkdirat(int(d.f.Fd()), name, mode)
}

// openSubdir opens the directory name in d without following a link.
func (d *safeDir) openSubdir(name string) (*safeDir, error) {
	fd, err := unix.Openat(int(d.f.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &safeDir{path: filepath.Join(d.path, name), f: os.NewFile(uintptr(fd), name)}, nil
}

// mtime is name's modification time, not following a link; ok is false
// when it cannot be read.
func (d *safeDir) mtime(name string) (t time.Time, ok bool) {
	var st unix.Stat_t
	if unix.Fstatat(int(d.f.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return t, false
	}
	return time.Unix(st.Mtim.Unix()), true
}

// openReadNoFollow opens name in the open directory d for reading,
// without following a link or blocking on a FIFO.
func openReadNoFollow(d *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openPathNoFollow opens path for reading without following a link (in
// its last element) or blocking on a FIFO.
func openPathNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// fileIdentity is the device and inode of an opened file's FileInfo.
func fileIdentity(fi os.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t) // os.Stat's, not x/sys/unix's type
	if !ok {
		return 0, 0, false
	}
	return st.Dev, st.Ino, true
}

// openTrusted opens the existing directory abs and checks it as
// openSafeDir does (checkDirTrust, as its owner).
func openTrusted(abs string) (sd *safeDir, trust error, err error) {
	f, err := os.OpenFile(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	sd = &safeDir{path: abs, f: f}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		sd.close()
		return nil, nil, err
	}
	return sd, checkDirTrust(abs, &st, true), nil
}
