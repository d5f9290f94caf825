// Package configfile reads the small files an operator points gpuwatch at
// (--sim.config, --metrics.config, --web.config.file) without trusting
// them: only a regular file under a size limit is read. A FIFO would block
// the start forever, /dev/zero would grow memory without end, and a huge
// file would cost gigabytes to parse.
package configfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxSize is the largest config file read. The largest real ones (a
// simulated 64-GPU fleet with its processes) are a few kilobytes.
const MaxSize = 1 << 20

// Read returns the contents of the regular file at path. Every error names
// the path.
func Read(path string) ([]byte, error) {
	return ReadLimit(path, MaxSize)
}

// ReadLimit is Read with a size limit of its own.
func ReadLimit(path string, limit int64) ([]byte, error) {
	if err := Check(path, limit); err != nil {
		return nil, err
	}
	// O_NONBLOCK: should the path have been swapped for a FIFO since the
	// check, the open does not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err // *PathError: names the path
	}
	defer f.Close()
	if err := checkInfo(f.Stat()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes; a config file this big is not one", path, limit)
	}
	return data, nil
}

// Check fails unless path is a regular file of at most limit bytes, for
// files read by a library (exporter-toolkit reads the web config itself).
func Check(path string, limit int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := checkInfo(fi, nil); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if fi.Size() > limit {
		return fmt.Errorf("%s: %d bytes, larger than %d; a config file this big is not one", path, fi.Size(), limit)
	}
	return nil
}

func checkInfo(fi os.FileInfo, err error) error {
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", describeMode(fi.Mode()))
	}
	return nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}
