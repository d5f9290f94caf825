package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpuwatch/gpuwatch/internal/textfile"
)

// WriteFile writes a finished report to path, as --output asks:
//   - a new or regular file is replaced atomically (a temporary file next to
//     it, then a rename), so a reader never sees half a report;
//   - a symbolic link is followed: its target is written the same way, and
//     the link stays a link;
//   - a character device or a FIFO (/dev/null, /dev/stdout, a terminal, a
//     pipe) is written in place: renaming over it would replace the device
//     node with a regular file;
//   - anything else (a directory, a block device, a socket) is refused.
func WriteFile(path string, data []byte) error {
	info, err := os.Stat(path) // follows links
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, lerr := os.Lstat(path); lerr == nil {
			return fmt.Errorf("--output=%s: a symbolic link to a missing file; give the target itself", path)
		}
		return textfile.WriteAtomic(path, data)
	case err != nil:
		return fmt.Errorf("--output=%s: %w", path, err)
	}
	switch mode := info.Mode(); {
	case mode.IsRegular():
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("--output=%s: %w", path, err)
		}
		return textfile.WriteAtomic(target, data)
	case mode&fs.ModeCharDevice != 0, mode&fs.ModeNamedPipe != 0:
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("--output=%s: %w", path, err)
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return fmt.Errorf("--output=%s: writing: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--output=%s: %w", path, err)
		}
		return nil
	default:
		return fmt.Errorf("--output=%s: not a regular file, a character device or a pipe (%s): refusing to replace it", path, mode.Type())
	}
}
