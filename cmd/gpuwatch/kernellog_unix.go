//go:build !windows

package main

import (
	"errors"
	"syscall"
)

// readKernelLogFile reads path to its end without blocking: /dev/kmsg
// hands out one record per read and answers EAGAIN once the buffer is
// read (a plain read would then wait for the next message), EPIPE when a
// record was overwritten under the reader (it goes on). The raw system
// calls keep Go's poller, which would wait on EAGAIN, out of it.
func readKernelLogFile(path string, limit int) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if mode := st.Mode & syscall.S_IFMT; mode != syscall.S_IFREG && mode != syscall.S_IFCHR {
		return nil, errors.New("not a regular file or a character device")
	}
	var out []byte
	buf := make([]byte, 64<<10)
	for len(out) < limit {
		n, err := syscall.Read(fd, buf)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			return out, nil
		case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
	return out, nil
}
