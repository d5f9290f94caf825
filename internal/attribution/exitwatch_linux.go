package attribution

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Exit watching: how a cached process that exits is noticed at the next
// Enrich rather than at its next periodic check.
//
// A pidfd (pidfd_open(2), Linux 5.3) names one process, not a PID: it
// can never come to mean another process that reuses the number, and it
// becomes readable when that process exits. Each cached process gets a
// pidfd, opened before its /proc files are read, so that the facts read
// are those of the pidfd's process or the pidfd reports its exit. The
// pidfds sit in one epoll instance, and Enrich asks it, without waiting,
// which processes exited since the previous call: one system call per
// scrape, however many processes are cached, and none when nothing
// exited. An exited process's entry is marked so, its pidfd is closed,
// and if the PID is listed again its /proc is re-read (see
// Attributor.noteExits).
//
// pidfd_open looks PIDs up in the caller's PID namespace, so pidfds are
// only used when ProcRoot is the procfs of that namespace: with the host's
// /proc mounted at --path.procfs in a container that has a PID namespace
// of its own, the PIDs would name other processes. Where pidfds cannot be
// used (that case, a fixture tree, a kernel without pidfd_open, a seccomp
// profile that refuses it, too many open files), entries are checked every
// RevalidateInterval instead.

// maxWatched bounds the pidfds held open; processes beyond it are checked
// periodically instead. Far more than the GPU processes of one host.
const maxWatched = 16384

// exitWatcher holds the epoll instance that the cached processes' pidfds
// are registered in. Its methods, but open, are called with
// Attributor.mu held.
type exitWatcher struct {
	epfd int
	// open returns a pidfd for pid. It runs in the procfs job's workers,
	// concurrently; tests replace it.
	open    func(pid int) (int, error)
	watched map[int32]*pidEntry // by pidfd
	events  [64]unix.EpollEvent
}

// newExitWatcher returns a watcher for the processes under procRoot, or
// nil and the reason why pidfds cannot be used there.
func newExitWatcher(procRoot string) (*exitWatcher, error) {
	if err := isOwnProcfs(procRoot); err != nil {
		return nil, err
	}
	// Probe: pidfd_open may be missing (ENOSYS) or forbidden by seccomp
	// (EPERM) even where the kernel is new enough.
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open: %w", err)
	}
	unix.Close(fd)
	return newEpollWatcher(func(pid int) (int, error) { return unix.PidfdOpen(pid, 0) })
}

// newEpollWatcher returns a watcher whose pidfds come from open.
func newEpollWatcher(open func(pid int) (int, error)) (*exitWatcher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	return &exitWatcher{epfd: epfd, open: open, watched: make(map[int32]*pidEntry)}, nil
}

// isOwnProcfs reports (as nil) whether procRoot is a procfs mount whose PID
// namespace is the one this process's PIDs, and so pidfd_open's, are
// looked up in. The NSpid line of a process's status lists its PIDs from
// the namespace of the procfs it is read through down to its own: exactly
// one, our own PID, means the two namespaces are the same. A procfs of an
// ancestor namespace (the host's /proc in a container) lists two or more;
// one of a namespace we are not in has no "self" at all.
func isOwnProcfs(procRoot string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(procRoot, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", procRoot, err)
	}
	if st.Type != unix.PROC_SUPER_MAGIC {
		return fmt.Errorf("%s is not a procfs mount", procRoot)
	}
	path := filepath.Join(procRoot, "self", "status")
	status, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", procRoot, err)
	}
	for line := range strings.Lines(string(status)) {
		nspid, ok := strings.CutPrefix(line, "NSpid:")
		if !ok {
			continue
		}
		if f := strings.Fields(nspid); len(f) != 1 || f[0] != strconv.Itoa(os.Getpid()) {
			return fmt.Errorf("%s is the procfs of another PID namespace (%s NSpid %v, our PID %d)", procRoot, path, f, os.Getpid())
		}
		return nil
	}
	return fmt.Errorf("%s: no NSpid line (kernel older than 4.1)", path)
}

// errWatchFull reports that maxWatched pidfds are open already.
var errWatchFull = errors.New("too many watched processes")

// add registers the pidfd of e's process. On failure the caller still owns
// fd and must close it.
func (w *exitWatcher) add(fd int, e *pidEntry) error {
	if len(w.watched) >= maxWatched {
		return errWatchFull
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	w.watched[int32(fd)] = e
	e.pidfd = int32(fd)
	return nil
}

// remove closes e's pidfd, if it has one, which also takes it out of the
// epoll instance.
func (w *exitWatcher) remove(e *pidEntry) {
	if e.pidfd < 0 {
		return
	}
	delete(w.watched, e.pidfd)
	unix.Close(int(e.pidfd))
	e.pidfd = -1
}

// exited calls gone for each watched entry whose process exited since the
// previous call, after closing its pidfd. It does not block.
func (w *exitWatcher) exited(gone func(*pidEntry)) error {
	for {
		n, err := unix.EpollWait(w.epfd, w.events[:], 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range w.events[:n] {
			e := w.watched[ev.Fd]
			if e == nil {
				// Not ours: cannot happen, as closing a pidfd
				// unregisters it; removed so that it cannot fire
				// again.
				unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
				continue
			}
			w.remove(e)
			gone(e)
		}
		if n < len(w.events) {
			return nil
		}
	}
}

// close closes every pidfd and the epoll instance.
func (w *exitWatcher) close() error {
	for _, e := range w.watched {
		w.remove(e)
	}
	return unix.Close(w.epfd)
}

// closePidfd closes a pidfd that no entry took, if any.
func closePidfd(fd int32) {
	if fd >= 0 {
		unix.Close(int(fd))
	}
}
