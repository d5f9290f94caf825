package release

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The .deb installs into a clean Debian 11 minbase root with dpkg: the
// gpuwatch system user and group are created, the binary, the unit (the
// very file deploy/systemd ships) and the default flags file land, the
// binary runs as that user; reinstalling works; removing keeps the user,
// purging removes the flags file.
func TestDebInstallsIntoCleanDebian(t *testing.T) {
	r := findRelease(t)
	root := cleanRoot(t)
	upper := t.TempDir()
	deb := r.deb("amd64")
	if _, err := os.Stat(deb); err != nil {
		t.Fatal(err)
	}
	withDeb := []string{"--bind", deb + ":/tmp/gpuwatch.deb"}

	if out, err := tryInRoot(root, upper, nil, "getent", "passwd", "gpuwatch"); err == nil {
		t.Fatalf("the clean root already has a gpuwatch user: %s", out)
	}
	inRoot(t, root, upper, withDeb, "dpkg", "-i", "/tmp/gpuwatch.deb")

	status := inRoot(t, root, upper, nil, "dpkg-query", "-W", "-f", "${Status} ${Version}", "gpuwatch")
	if want := "install ok installed " + r.version; status != want {
		t.Errorf("dpkg-query: %q, want %q", status, want)
	}

	// name:password:uid:gid:gecos:home:shell
	passwd := strings.Split(strings.TrimSpace(inRoot(t, root, upper, nil, "getent", "passwd", "gpuwatch")), ":")
	if len(passwd) != 7 {
		t.Fatalf("getent passwd gpuwatch: %q", passwd)
	}
	uid, _ := strconv.Atoi(passwd[2])
	if uid == 0 || uid >= 1000 {
		t.Errorf("gpuwatch uid %d, want a system uid (1-999)", uid)
	}
	if passwd[5] != "/nonexistent" || passwd[6] != "/usr/sbin/nologin" {
		t.Errorf("gpuwatch home %q shell %q, want /nonexistent and /usr/sbin/nologin", passwd[5], passwd[6])
	}
	group := strings.Split(strings.TrimSpace(inRoot(t, root, upper, nil, "getent", "group", "gpuwatch")), ":")
	if len(group) != 4 || group[2] != passwd[3] {
		t.Errorf("group gpuwatch %q is not the user's primary group %s", group, passwd[3])
	}

	unit := inRoot(t, root, upper, nil, "cat", "/lib/systemd/system/gpuwatch.service")
	shipped, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "systemd", "gpuwatch.service"))
	if err != nil {
		t.Fatal(err)
	}
	if unit != string(shipped) {
		t.Error("the installed unit differs from deploy/systemd/gpuwatch.service")
	}
	if out := inRoot(t, root, upper, nil, "cat", "/etc/default/gpuwatch"); !strings.Contains(out, "GPUWATCH_OPTS=") {
		t.Errorf("/etc/default/gpuwatch does not set GPUWATCH_OPTS:\n%s", out)
	}
	version := inRoot(t, root, upper, []string{"--userspec", "gpuwatch:gpuwatch"}, "/usr/bin/gpuwatch", "--version")
	if !strings.Contains(version, r.version) {
		t.Errorf("gpuwatch --version as user gpuwatch: %q lacks %s", version, r.version)
	}

	// The pre-install script finds the user and group already there.
	inRoot(t, root, upper, withDeb, "dpkg", "-i", "/tmp/gpuwatch.deb")

	inRoot(t, root, upper, nil, "dpkg", "--remove", "gpuwatch")
	for _, gone := range []string{"/usr/bin/gpuwatch", "/lib/systemd/system/gpuwatch.service"} {
		if out, err := tryInRoot(root, upper, nil, "test", "-e", gone); err == nil {
			t.Errorf("%s is still there after dpkg --remove %s", gone, out)
		}
	}
	inRoot(t, root, upper, nil, "test", "-e", "/etc/default/gpuwatch")
	inRoot(t, root, upper, nil, "getent", "passwd", "gpuwatch")
	inRoot(t, root, upper, nil, "dpkg", "--purge", "gpuwatch")
	if _, err := tryInRoot(root, upper, nil, "test", "-e", "/etc/default/gpuwatch"); err == nil {
		t.Error("/etc/default/gpuwatch is still there after dpkg --purge")
	}
}
