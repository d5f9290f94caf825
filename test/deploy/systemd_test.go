package deploy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// units lists deploy/systemd/*.service.
func units(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "deploy", "systemd", "*.service"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no units in deploy/systemd (%v)", err)
	}
	return paths
}

// execStart returns a unit's ExecStart command line.
func execStart(t *testing.T, unit []byte) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^ExecStart=(.+)$`).FindSubmatch(unit)
	if m == nil {
		t.Fatal("no ExecStart")
	}
	return string(m[1])
}

// installedUnit copies a unit into a temporary directory with its
// ExecStart binary pointing at the gpuwatch under test: systemd-analyze
// verify checks that the binary exists and is executable, and this machine
// has no /usr/bin/gpuwatch. Nothing else of the unit changes.
func installedUnit(t *testing.T, path string) string {
	t.Helper()
	unit, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := execStart(t, unit)
	bin, _, _ := strings.Cut(cmd, " ")
	if bin != "/usr/bin/gpuwatch" {
		t.Fatalf("ExecStart runs %s, want /usr/bin/gpuwatch (where the packages install it)", bin)
	}
	unit = bytes.Replace(unit, []byte("ExecStart="+bin), []byte("ExecStart="+gpuwatchBin), 1)
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(dst, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestSystemdUnitsVerify runs systemd-analyze verify on every unit. It exits
// 0 on unknown keys and bad values, so any output at all is a failure.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze := testenv.RequireTool(t, "systemd-analyze", "systemd")
	for _, path := range units(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			out, err := exec.Command(analyze, "verify", installedUnit(t, path)).CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
			}
		})
	}
}

// TestSystemdUnitsHardened holds every unit to systemd's own exposure score
// (systemd-analyze security, 0 = locked down, 10 = exposed): gpuwatch needs
// /dev/nvidia* and every process's /proc entry, and nothing more.
func TestSystemdUnitsHardened(t *testing.T) {
	analyze := testenv.RequireTool(t, "systemd-analyze", "systemd")
	const maxExposure = 2.5
	for _, path := range units(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			out, err := exec.Command(analyze, "security", "--offline=yes", "--no-pager", installedUnit(t, path)).CombinedOutput()
			if err != nil {
				t.Fatalf("systemd-analyze security: %v\n%s", err, out)
			}
			m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("no exposure level in:\n%s", out)
			}
			level, _ := strconv.ParseFloat(string(m[1]), 64)
			if level > maxExposure {
				t.Errorf("exposure %.1f > %.1f:\n%s", level, maxExposure, out)
			}
		})
	}
}

// TestSystemdUnitsRun starts each unit's ExecStart command line (the
// EnvironmentFile's variables empty, as installed): output files move to a
// temporary directory and the listener to a free loopback port. A unit that
// reads GPUs gets the simulator (--backend=sim); the Slurm controller's unit
// runs as it is, without GPU or driver (--backend=none, as on a controller),
// against a real single-node Slurm, and must serve the cluster's metrics and
// no GPU series.
func TestSystemdUnitsRun(t *testing.T) {
	for _, path := range units(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			unit, _ := os.ReadFile(path)
			dir := t.TempDir()
			port := testenv.FreePort(t)
			fields := strings.Fields(execStart(t, unit))
			var args []string
			output, backend := "", ""
			for _, f := range fields[1:] {
				name, value, _ := strings.Cut(f, "=")
				switch {
				case strings.HasPrefix(f, "$"):
					continue // EnvironmentFile settings, empty by default
				case name == "--output":
					output = filepath.Join(dir, filepath.Base(value))
					f = name + "=" + output
				case name == "--web.listen-address":
					continue
				case name == "--backend":
					backend = value
				}
				args = append(args, f)
			}
			want, wantNot := "gpu_up{", ""
			switch {
			case slices.Contains(args, "--collector.slurm"):
				if backend != "none" {
					t.Fatalf("the Slurm controller's unit runs --backend=%q; controllers have no GPU: want none", backend)
				}
				testenv.StartSlurm(t, 2)
				want, wantNot = `slurm_collector_success{command="squeue"} 1`, "gpu_up"
			case backend == "":
				args = append(args, "--backend=sim", "--sim.profile=h100")
			}
			if output == "" {
				args = append(args, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
			}
			p := startGpuwatch(t, args, nil)
			deadline := time.Now().Add(60 * time.Second)
			for {
				var got string
				if output != "" {
					b, _ := os.ReadFile(output)
					got = string(b)
				} else if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port)); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					got = string(b)
				}
				if strings.Contains(got, want) {
					if wantNot != "" && strings.Contains(got, wantNot) {
						t.Fatalf("gpuwatch %s serves %s:\n%s", strings.Join(args, " "), wantNot, grepLines(got, wantNot))
					}
					return
				}
				if p.Exited() || time.Now().After(deadline) {
					t.Fatalf("gpuwatch %s: no %q (exited: %v)\n%s\n%s", strings.Join(args, " "), want, p.Exited(), grepLines(got, "slurm_collector"), p.Output)
				}
				time.Sleep(250 * time.Millisecond)
			}
		})
	}
}

// A ReadWritePaths= directory that does not exist stops a unit from
// starting at all (status 226/NAMESPACE), so every one a host may lack is
// optional ("-"); the textfile unit may write the default directory of its
// --output and Debian's node_exporter directory.
func TestSystemdUnitsStartWithoutOptionalDirectories(t *testing.T) {
	for _, path := range units(t) {
		unit, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var writable []string
		for _, m := range regexp.MustCompile(`(?m)^ReadWritePaths=(.+)$`).FindAllSubmatch(unit, -1) {
			for p := range strings.FieldsSeq(string(m[1])) {
				if !strings.HasPrefix(p, "-") {
					t.Errorf("%s: ReadWritePaths=%s must be optional (-%s): a host without it could not start the unit", filepath.Base(path), p, p)
				}
				writable = append(writable, strings.TrimPrefix(p, "-"))
			}
		}
		if filepath.Base(path) != "gpuwatch-textfile.service" {
			continue
		}
		m := regexp.MustCompile(`(?m)^Environment=GPUWATCH_TEXTFILE_DIR=(\S+)$`).FindSubmatch(unit)
		if m == nil || !strings.Contains(execStart(t, unit), "--output=${GPUWATCH_TEXTFILE_DIR}/") {
			t.Fatalf("the textfile unit's --output is not under a default GPUWATCH_TEXTFILE_DIR")
		}
		for _, dir := range []string{string(m[1]), "/var/lib/prometheus/node-exporter"} {
			if !slices.Contains(writable, dir) {
				t.Errorf("the textfile unit may not write %s (ReadWritePaths: %v)", dir, writable)
			}
		}
	}
}
