package jobs

import (
	"errors"
	"os"
	"time"
)

// The accounting directory is opened relative to an open directory and
// never through a link (openat, O_NOFOLLOW, flock: safedir_unix.go).
// Windows has none of these as such, and its gpuwatch keeps no job
// records (they need the NVML backend's accounting): every operation says
// so, and `gpuwatch job` asks nodes or Prometheus instead.
var errNoSafeDir = errors.New("the job journal is kept on Linux only (gpuwatch on Windows keeps no job records)")

func openSafeDir(string) (*safeDir, error) { return nil, errNoSafeDir }

func checkAncestors(string) error { return errNoSafeDir }

func (d *safeDir) open(string, int) (*os.File, error) { return nil, errNoSafeDir }

func (d *safeDir) rename(string, string) error { return errNoSafeDir }

func (d *safeDir) remove(string) error { return errNoSafeDir }

func (d *safeDir) kind(string) (uint32, error) { return 0, errNoSafeDir }

func (d *safeDir) lock() error { return errNoSafeDir }

func (d *safeDir) mkdir(string, uint32) error { return errNoSafeDir }

func (d *safeDir) openSubdir(string) (*safeDir, error) { return nil, errNoSafeDir }

func (d *safeDir) mtime(string) (time.Time, bool) { return time.Time{}, false }

func openReadNoFollow(*os.File, string) (*os.File, error) { return nil, errNoSafeDir }

func openPathNoFollow(string) (*os.File, error) { return nil, errNoSafeDir }

func fileIdentity(os.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }

func openTrusted(string) (*safeDir, error, error) { return nil, nil, errNoSafeDir }

func checkOpened(*os.File, string, bool) error { return errNoSafeDir }
