//go:build !windows

package report

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// --output replaces a regular file atomically, writes a link's target and
// keeps the link, writes a pipe or character device in place and refuses a
// directory: a device node is never replaced by a regular file.
func TestWriteFileKeepsWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()

	regular := filepath.Join(dir, "report.txt")
	if err := os.WriteFile(regular, []byte("old report, longer than the new one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(regular, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "new\n" {
		t.Errorf("regular file holds %q", b)
	}

	link := filepath.Join(dir, "latest")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("through the link\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "through the link\n" {
		t.Errorf("the link's target holds %q", b)
	}

	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The reader opens first (without waiting for a writer) and reads after
	// the write: a pipe replaced by a file leaves it nothing to read.
	reader, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := WriteFile(fifo, []byte("into the pipe\n")); err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(reader); string(got) != "into the pipe\n" {
		t.Errorf("the pipe's reader got %q", got)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v %v", fi.Mode(), err)
	}

	// A character device: a link to /dev/null, and where the test may
	// create device nodes (root), a null device node of its own.
	devLink := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", devLink); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(devLink, []byte("discarded\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(devLink); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link to /dev/null was replaced: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat("/dev/null"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a character device: %v %v", fi.Mode(), err)
	}
	want := 5
	node := filepath.Join(dir, "nullnode")
	if err := syscall.Mknod(node, syscall.S_IFCHR|0o666, int(1<<8|3)); err == nil {
		want++
		if err := WriteFile(node, []byte("discarded\n")); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(node); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			t.Errorf("the device node was replaced: %v %v", fi.Mode(), err)
		}
	} else {
		t.Logf("mknod: %v (not root): the device node case is covered by the link to /dev/null", err)
	}

	sub := filepath.Join(dir, "dir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(sub, []byte("x")); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("a directory: %v, want a refusal", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != want {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("left behind: %v", names)
	}
}
