//go:build !windows

package configfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO, a character device and a directory: Unix's kinds of file.
func TestRefusesWhatIsNotASmallRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yml")
	if err := os.WriteFile(big, make([]byte, MaxSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "named pipe"},
		{"/dev/zero", "character device"},
		{dir, "directory"},
		{big, "larger than"},
		{filepath.Join(dir, "absent.yml"), "no such file"},
	} {
		_, err := Read(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%s) = %v, want an error naming the file and saying %q", tc.path, err, tc.want)
		}
	}
}
