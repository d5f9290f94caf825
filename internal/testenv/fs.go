package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// SmallTmpfs mounts a tmpfs of size (as mount's size=, "64k") on a new
// directory and unmounts it when the test ends. It needs root (CAP_SYS_ADMIN):
// without it the test skips (fails under CI=true).
func SmallTmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		Missing(t, "mounting a tmpfs needs root: "+string(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// FillDisk writes zeros with dd into a new file in dir until the file
// system is full, and returns that file's path: remove it to free the space.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	RequireTool(t, "dd", "coreutils")
	path := filepath.Join(dir, "fill")
	// dd exits 1 with "No space left on device": that is the point.
	out, _ := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=1k").CombinedOutput()
	if info, err := os.Stat(path); err != nil || info.Size() == 0 {
		t.Fatalf("dd did not fill %s: %s", dir, out)
	}
	return path
}

// AsUser runs a command as another uid and gid (setpriv, from util-linux),
// as an unprivileged user would, and fails the test if it fails. It needs
// root.
func AsUser(t testing.TB, uid int, name string, args ...string) {
	t.Helper()
	setpriv := RequireTool(t, "setpriv", "util-linux")
	if os.Geteuid() != 0 {
		Missing(t, "running a command as another user needs root")
	}
	id := strconv.Itoa(uid)
	cmd := exec.Command(setpriv, append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", "--", name}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid %d: %s %v: %v\n%s", uid, name, args, err, out)
	}
}
