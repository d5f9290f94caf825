//go:build !windows

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
	"syscall"
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
	want := []string{"gpuwatch", "grafana", "grafana-password", "node-exporter", "prometheus"}
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
	want = []string{"gpuwatch-sim", "grafana", "grafana-password", "node-exporter", "prometheus"}
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

// TestComposeIsPrivateByDefault: a GPU host's stack is reachable from the
// host only (every port published on 127.0.0.1; BIND_ADDRESS opens them),
// Prometheus cannot be stopped or reconfigured over HTTP, and Grafana has
// neither anonymous viewers nor admin/admin.
func TestComposeIsPrivateByDefault(t *testing.T) {
	root := testenv.RepoRoot()
	for _, v := range []string{"BIND_ADDRESS", "GRAFANA_ADMIN_PASSWORD", "COMPOSE_PROFILES"} {
		t.Setenv(v, "") // the shell's own must not leak in, and come back afterwards
		os.Unsetenv(v)
	}
	for _, c := range []struct {
		env    []string
		hostIP string
	}{
		{[]string{"COMPOSE_PROFILES=gpu,sim"}, "127.0.0.1"},
		{[]string{"COMPOSE_PROFILES=gpu,sim", "BIND_ADDRESS=0.0.0.0"}, "0.0.0.0"},
	} {
		p, err := deploycheck.LoadCompose(root, c.env...)
		if err != nil {
			t.Fatal(err)
		}
		published := 0
		for _, s := range p.Services {
			for _, port := range s.Ports {
				published++
				if port.HostIP != c.hostIP {
					t.Errorf("%v: service %s publishes %s on %q, want %s", c.env, s.Name, port.Published, port.HostIP, c.hostIP)
				}
			}
		}
		if published < 5 {
			t.Errorf("%v: %d published ports, want those of gpuwatch, gpuwatch-sim, node-exporter, Prometheus and Grafana", c.env, published)
		}
	}

	p, err := deploycheck.LoadCompose(root, "COMPOSE_PROFILES=gpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range service(t, p, "prometheus").Command {
		if arg == "--web.enable-lifecycle" || arg == "--web.enable-admin-api" {
			t.Errorf("prometheus runs with %s: anyone reaching it may stop it or delete data", arg)
		}
	}

	graf := service(t, p, "grafana")
	env := map[string]string{}
	for k, v := range graf.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	if v, ok := env["GF_SECURITY_ADMIN_PASSWORD"]; ok {
		t.Errorf("grafana's admin password is set in the compose file (%q)", v)
	}
	if env["GF_AUTH_ANONYMOUS_ENABLED"] != "false" {
		t.Errorf("GF_AUTH_ANONYMOUS_ENABLED=%q, want false", env["GF_AUTH_ANONYMOUS_ENABLED"])
	}
	file := env["GF_SECURITY_ADMIN_PASSWORD__FILE"]
	if !mountsVolume(graf, "grafana-secrets", file) {
		t.Errorf("GF_SECURITY_ADMIN_PASSWORD__FILE=%q is not in the grafana-secrets volume: %+v", file, graf.Volumes)
	}
	if d, ok := graf.DependsOn["grafana-password"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
		t.Errorf("grafana depends on %+v, want grafana-password to complete first", graf.DependsOn)
	}
	gen := service(t, p, "grafana-password")
	if !mountsVolume(gen, "grafana-secrets", "/secrets/grafana-admin-password") {
		t.Errorf("grafana-password does not write into the grafana-secrets volume: %+v", gen.Volumes)
	}
	checkPasswordScript(t, gen)
}

// mountsVolume says whether s mounts the named volume at a directory that
// holds path.
func mountsVolume(s types.ServiceConfig, volume, path string) bool {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume && v.Source == volume && strings.HasPrefix(path, strings.TrimSuffix(v.Target, "/")+"/") {
			return true
		}
	}
	return false
}

// checkPasswordScript runs grafana-password's script (as compose passes it
// to sh, its volume moved to a temporary directory): a random password the
// first time, the same one later, GRAFANA_ADMIN_PASSWORD when given; the
// file is Grafana's (uid 472) alone.
func checkPasswordScript(t *testing.T, s types.ServiceConfig) {
	t.Helper()
	if len(s.Command) != 3 || s.Command[0] != "sh" || s.Command[1] != "-c" {
		t.Fatalf("grafana-password command %q, want sh -c SCRIPT", s.Command)
	}
	dir := t.TempDir()
	script := strings.ReplaceAll(s.Command[2], "/secrets/", dir+"/")
	file := filepath.Join(dir, "grafana-admin-password")
	run := func(env ...string) string {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("grafana-password script: %v\n%s", err, out)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), string(b)) {
			t.Errorf("the script does not print the password %q:\n%s", b, out)
		}
		return string(b)
	}
	first := run("GRAFANA_ADMIN_PASSWORD=")
	if len(first) < 20 || strings.ContainsAny(first, " \n") || first == "admin" {
		t.Errorf("generated password %q: want 24 random base64 characters", first)
	}
	if again := run("GRAFANA_ADMIN_PASSWORD="); again != first {
		t.Errorf("a second run changed the password from %q to %q", first, again)
	}
	if given := run("GRAFANA_ADMIN_PASSWORD=correct horse"); given != "correct horse" {
		t.Errorf("GRAFANA_ADMIN_PASSWORD=correct horse wrote %q", given)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("password file mode %v, want 0600", st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Getuid() == 0 && sys.Uid != 472 {
		t.Errorf("password file owned by uid %d, want Grafana's 472", sys.Uid)
	}
}
