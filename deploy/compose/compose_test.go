// Package compose holds the docker compose stack (compose.yaml and the files
// it mounts) and its checks; it has no Go code of its own. Docker cannot run
// here: compose-go validates the file as Docker Compose would load it, promtool
// checks the Prometheus configuration it mounts, and test/e2e runs that
// configuration with the real binaries.
package compose

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"

	"github.com/gpuwatch/gpuwatch/internal/deploycheck"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("services %v: %v", p.ServiceNames(), err)
	}
	return s
}

// TestComposeLoads: `docker compose up -d` (the .env selects the gpu
// profile) starts gpuwatch on the GPU, node_exporter, Prometheus and
// Grafana; COMPOSE_PROFILES=sim swaps in the simulator under the same
// network name.
func TestComposeLoads(t *testing.T) {
	root := testenv.RepoRoot()
	t.Setenv("COMPOSE_PROFILES", "") // the shell's own must not leak in
	os.Unsetenv("COMPOSE_PROFILES")
	gpu, err := deploycheck.LoadCompose(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gpuwatch", "grafana", "node-exporter", "prometheus"}
	if got := gpu.ServiceNames(); !slices.Equal(got, want) {
		t.Errorf("default services %v, want %v", got, want)
	}
	g := service(t, gpu, "gpuwatch")
	if g.Pid != "host" || g.Deploy == nil || len(g.Deploy.Resources.Reservations.Devices) != 1 ||
		g.Deploy.Resources.Reservations.Devices[0].Driver != "nvidia" {
		t.Errorf("gpuwatch: pid %q, deploy %+v: want the host PID namespace and the nvidia device", g.Pid, g.Deploy)
	}

	sim, err := deploycheck.LoadCompose(root, "COMPOSE_PROFILES=sim")
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"gpuwatch-sim", "grafana", "node-exporter", "prometheus"}
	if got := sim.ServiceNames(); !slices.Equal(got, want) {
		t.Errorf("sim services %v, want %v", got, want)
	}
	s := service(t, sim, "gpuwatch-sim")
	if !slices.Contains(s.Command, "--backend=sim") || !slices.Contains(s.Command, "--sim.profile=dgx-h100") {
		t.Errorf("gpuwatch-sim command %q", s.Command)
	}
	if n := s.Networks["default"]; n == nil || !slices.Contains(n.Aliases, "gpuwatch") {
		t.Errorf("gpuwatch-sim must answer as gpuwatch on the network: %+v", s.Networks)
	}
}

// TestComposeMountsExist: every file the stack mounts from the repository
// exists, and the dashboards and rules are the shipped ones.
func TestComposeMountsExist(t *testing.T) {
	root := testenv.RepoRoot()
	p, err := deploycheck.LoadCompose(root, "COMPOSE_PROFILES=gpu,sim")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind || !strings.HasPrefix(v.Source, root) {
				continue // host paths (/etc/passwd, the Docker socket, /)
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("service %s mounts %s: %v", s.Name, v.Source, err)
			}
		}
	}
	graf := service(t, p, "grafana")
	dash, err := deploycheck.HostPath(graf, "/var/lib/grafana/dashboards")
	if err != nil || dash != filepath.Join(root, "deploy", "grafana", "dashboards") {
		t.Errorf("grafana dashboards from %q (%v)", dash, err)
	}
	var provider struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, graf, "/etc/grafana/provisioning/dashboards/gpuwatch.yml", &provider)
	if len(provider.Providers) != 1 || provider.Providers[0].Options.Path != "/var/lib/grafana/dashboards" {
		t.Errorf("dashboard provider %+v", provider)
	}
	var ds struct {
		Datasources []struct {
			Type, URL string
			IsDefault bool `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, graf, "/etc/grafana/provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" || !ds.Datasources[0].IsDefault {
		t.Errorf("datasources %+v", ds)
	}
}

func readYAML(t *testing.T, s types.ServiceConfig, target string, v any) {
	t.Helper()
	path, err := deploycheck.HostPath(s, target)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestComposePrometheusConfig runs `promtool check config` on the mounted
// prometheus.yml, its container paths mapped to the files compose mounts
// there (so the rule files are checked too), and reads the file_sd lists.
func TestComposePrometheusConfig(t *testing.T) {
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	root := testenv.RepoRoot()
	p, err := deploycheck.LoadCompose(root)
	if err != nil {
		t.Fatal(err)
	}
	prom := service(t, p, "prometheus")
	cfgPath, err := deploycheck.HostPath(prom, "/etc/prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := deploycheck.LoadPrometheusConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var sdFiles []string
	mapPath := func(pattern string) (string, error) {
		if strings.HasPrefix(pattern, "/etc/prometheus/rules/") {
			// Each rule file is mounted on its own; the directory is the
			// shipped deploy/prometheus.
			return filepath.Join(root, "deploy", "prometheus", filepath.Base(pattern)), nil
		}
		host, err := deploycheck.HostPath(prom, pattern)
		if err == nil && strings.Contains(pattern, "/targets/") {
			sdFiles = append(sdFiles, host)
		}
		return host, err
	}
	if err := cfg.Rewrite(mapPath, ""); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := cfg.Write(out); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := exec.CommandContext(ctx, promtool, "check", "config", out).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, res)
	}
	if !strings.Contains(string(res), "SUCCESS: 2 rule files found") {
		t.Errorf("promtool did not check both rule files:\n%s", res)
	}
	if len(sdFiles) != 2 {
		t.Fatalf("file_sd patterns %v, want the gpuwatch and node lists", sdFiles)
	}
	for _, pattern := range sdFiles {
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			t.Errorf("%s matches no file", pattern)
		}
		for _, f := range files {
			groups, err := deploycheck.LoadFileSD(f)
			if err != nil {
				t.Error(err)
				continue
			}
			for _, g := range groups {
				if len(g.Targets) == 0 || g.Labels["instance"] == "" {
					t.Errorf("%s: %+v: want targets and an instance label", f, g)
				}
			}
		}
	}
}
