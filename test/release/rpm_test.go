package release

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The .rpm for each architecture holds the binary of that release, the
// unit deploy/systemd ships, the flags file as a config file and the
// license, and runs the same user-creating scripts as the .deb (which
// TestDebInstallsIntoCleanDebian runs for real).
func TestRPMContentsAndScripts(t *testing.T) {
	r := findRelease(t)
	rpm := testenv.RequireTool(t, "rpm", "rpm")
	repo := testenv.RepoRoot()
	for _, arch := range arches {
		t.Run(arch, func(t *testing.T) {
			pkg := r.rpm(arch)
			query := func(args ...string) string {
				t.Helper()
				out, err := exec.Command(rpm, append([]string{"-qp"}, append(args, pkg)...)...).CombinedOutput()
				if err != nil {
					t.Fatalf("rpm -qp %v %s: %v\n%s", args, pkg, err, out)
				}
				return string(out)
			}

			if got, want := query("--qf", "%{NAME} %{VERSION} %{ARCH} %{LICENSE}"),
				"gpuwatch "+r.version+" "+rpmArch[arch]+" Apache-2.0"; got != want {
				t.Errorf("rpm header %q, want %q", got, want)
			}

			files := strings.Fields(query("-l"))
			want := []string{"/etc/sysconfig/gpuwatch", "/usr/bin/gpuwatch",
				"/usr/lib/systemd/system/gpuwatch.service", "/usr/share/doc/gpuwatch/LICENSE",
				"/usr/share/gpuwatch/slurm/gpuwatch-epilog-slurmctld.sh", "/usr/share/gpuwatch/slurm/gpuwatch-epilog.sh",
				"/usr/share/gpuwatch/slurm/gpuwatch-healthcheck.sh", "/usr/share/gpuwatch/slurm/gpuwatch.nhc",
				"/var/lib/gpuwatch"}
			if !slices.Equal(files, want) {
				t.Errorf("rpm -qpl: %q, want %q", files, want)
			}
			if config := strings.Fields(query("-c")); !slices.Equal(config, []string{"/etc/sysconfig/gpuwatch"}) {
				t.Errorf("rpm -qpc: %q, want only /etc/sysconfig/gpuwatch", config)
			}

			// --dump: path size mtime digest mode owner group isconfig ...
			digests := map[string]string{}
			for line := range strings.SplitSeq(strings.TrimSpace(query("--dump")), "\n") {
				f := strings.Fields(line)
				if len(f) < 7 {
					t.Fatalf("rpm --dump line %q", line)
				}
				digests[f[0]] = f[3]
				// The job journal's directory is the service user's, who
				// writes it; every other file is root's.
				owner := "root"
				if f[0] == "/var/lib/gpuwatch" {
					owner = "gpuwatch"
				}
				if f[5] != owner || f[6] != owner {
					t.Errorf("%s is owned by %s:%s, want %s:%s", f[0], f[5], f[6], owner, owner)
				}
			}
			for path, src := range map[string]string{
				"/usr/bin/gpuwatch":                                      r.binary(arch),
				"/usr/lib/systemd/system/gpuwatch.service":               filepath.Join(repo, "deploy", "systemd", "gpuwatch.service"),
				"/usr/share/gpuwatch/slurm/gpuwatch-epilog.sh":           filepath.Join(repo, "deploy", "slurm", "gpuwatch-epilog.sh"),
				"/usr/share/gpuwatch/slurm/gpuwatch-epilog-slurmctld.sh": filepath.Join(repo, "deploy", "slurm", "gpuwatch-epilog-slurmctld.sh"),
				"/usr/share/gpuwatch/slurm/gpuwatch-healthcheck.sh":      filepath.Join(repo, "deploy", "slurm", "gpuwatch-healthcheck.sh"),
				"/usr/share/gpuwatch/slurm/gpuwatch.nhc":                 filepath.Join(repo, "deploy", "slurm", "nhc", "gpuwatch.nhc"),
			} {
				if got, want := digests[path], sha256File(t, src); got != want {
					t.Errorf("%s in the rpm has sha256 %s, want %s's %s", path, got, src, want)
				}
			}

			scripts := query("--scripts")
			for _, s := range []struct{ header, file string }{
				{"preinstall scriptlet", "preinstall.sh"},
				{"postinstall scriptlet", "postinstall.sh"},
				{"preuninstall scriptlet", "preremove.sh"},
				{"postuninstall scriptlet", "postremove.sh"},
			} {
				body, err := os.ReadFile(filepath.Join(repo, "packaging", "scripts", s.file))
				if err != nil {
					t.Fatal(err)
				}
				i := strings.Index(scripts, s.header)
				if i < 0 {
					t.Errorf("rpm has no %s", s.header)
					continue
				}
				if !strings.Contains(scripts[i:], strings.TrimSpace(string(body))) {
					t.Errorf("rpm's %s is not packaging/scripts/%s:\n%s", s.header, s.file, scripts)
				}
			}
			if !strings.Contains(scripts, "useradd --system") {
				t.Error("rpm scripts create no system user")
			}
		})
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
