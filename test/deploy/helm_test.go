// Package deploy checks the deployment files of deploy/ against the real tools
// that consume them: helm renders and lints the chart, every rendered object
// decodes strictly into its Kubernetes API type, the DaemonSet's command line
// starts the built gpuwatch and answers its own probes, and systemd-analyze
// verifies the units.
package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// helmVersion is the helm scripts/helm.sh builds and caches.
const helmVersion = "v3.22.0"

var (
	repoRoot = testenv.RepoRoot()
	chartDir = filepath.Join(repoRoot, "deploy", "helm", "gpuwatch")
)

// helmBin is the cached helm of scripts/helm.sh (scripts/install-deps.sh
// builds it), or HELM_BIN. Building it here would take minutes inside a test.
func helmBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HELM_BIN"); p != "" {
		return p
	}
	p := filepath.Join(repoRoot, ".tools", "helm-"+helmVersion, "helm")
	if _, err := os.Stat(p); err != nil {
		testenv.Missing(t, "helm "+helmVersion+" is not built; run scripts/helm.sh (scripts/install-deps.sh does)")
	}
	return p
}

// valuesCase is one combination of chart values the tests render.
type valuesCase struct {
	name string
	set  []string // helm --set KEY=VALUE, one per entry
	// knownArgs: every container argument is a gpuwatch flag, so the
	// DaemonSet's command line is started for real (extraArgs could name
	// flags of another gpuwatch version).
	knownArgs bool
	// existingSecret is what the user's own web configuration Secret
	// (webConfig.existingSecret, which the chart does not render) turns on.
	existingSecret *userWebConfig
}

// userWebConfig is a web-config.yml the user wrote into their own Secret:
// TLS with the key pair in the same Secret, basic auth for testUser.
type userWebConfig struct {
	name           string // the Secret
	tls, basicAuth bool
}

// testPassword is the basic auth password behind testBcrypt (cost 4 keeps it cheap).
const (
	testUser     = "prometheus"
	testPassword = "scrape-secret"
	testBcrypt   = "$2a$04$K8q5jX1Jp7NWbJ184k.Vc.0R32DkM2oXi46CbndszDQogFS03rpg."
)

var valuesCases = []valuesCase{
	{name: "defaults", knownArgs: true},
	{name: "monitoring", knownArgs: true, set: []string{
		"serviceMonitor.enabled=true", "serviceMonitor.additionalLabels.release=kube-prometheus-stack",
		"prometheusRule.enabled=true", "dashboards.namespace=monitoring",
	}},
	{name: "tls-basic-auth", knownArgs: true, set: []string{
		"webConfig.tls.enabled=true", "webConfig.tls.secretName=gpuwatch-tls",
		"webConfig.basicAuth.enabled=true", "webConfig.basicAuth.users." + testUser + "=" + testBcrypt,
		"scrapeClient.basicAuthSecret.name=gpuwatch-scrape", "serviceMonitor.enabled=true", "prometheusRule.enabled=true",
	}},
	{name: "tls-only", knownArgs: true, set: []string{
		"webConfig.tls.enabled=true", "webConfig.tls.secretName=gpuwatch-tls", "serviceMonitor.enabled=true",
	}},
	{name: "basic-auth-only", knownArgs: true, set: []string{
		"webConfig.basicAuth.enabled=true", "webConfig.basicAuth.users." + testUser + "=" + testBcrypt,
	}},
	// webConfig.existingSecret: the chart cannot see what the Secret turns on.
	{name: "existing-secret-plain", knownArgs: true, set: []string{"webConfig.existingSecret=my-web-config"},
		existingSecret: &userWebConfig{name: "my-web-config"}},
	{name: "existing-secret-tls", knownArgs: true, set: []string{"webConfig.existingSecret=my-web-config"},
		existingSecret: &userWebConfig{name: "my-web-config", tls: true}},
	{name: "existing-secret-basic-auth", knownArgs: true, set: []string{"webConfig.existingSecret=my-web-config"},
		existingSecret: &userWebConfig{name: "my-web-config", basicAuth: true}},
	{name: "existing-secret-tls-basic-auth", knownArgs: true, set: []string{"webConfig.existingSecret=my-web-config"},
		existingSecret: &userWebConfig{name: "my-web-config", tls: true, basicAuth: true}},
	{name: "compat-dcgm", knownArgs: true, set: []string{"compat=dcgm\\,native", "extraArgs[0]=--collection.timeout=4s", "podMonitor.enabled=true"}},
	{name: "compat-dcgm-4.10", knownArgs: true, set: []string{"compat=dcgm\\,native", "compatDCGMVersion=4.10"}},
	{name: "gpu-operator-runtime-class", knownArgs: true, set: []string{
		"runtimeClassName=nvidia", "priorityClassName=system-node-critical",
		"attribution.cri.hostDir=/var/run/crio", "attribution.cri.socket=crio.sock",
		"attribution.docker.enabled=true", "collectors.gpm=false", "collectors.slurm=false",
	}},
	{name: "driver-root-no-toolkit", knownArgs: true, set: []string{
		"driverRoot=/run/nvidia/driver", "nvidiaContainerToolkit.env=false", "securityContext.privileged=true",
	}},
	{name: "no-attribution", knownArgs: true, set: []string{
		"attribution.enabled=false", "service.enabled=false", "podMonitor.enabled=true", "dashboards.enabled=false",
	}},
	{name: "job-journal-in-emptydir", knownArgs: true, set: []string{"accounting.hostPath="}},
}

// helmArgs are the --set-string flags of a case.
func (c valuesCase) helmArgs() []string {
	var args []string
	for _, s := range c.set {
		args = append(args, "--set", s)
	}
	return args
}

// runHelm runs helm with args and returns its standard output.
func runHelm(t testing.TB, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmBin(t), args...)
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// renderChart is `helm template` of the chart with a case's values.
func renderChart(t testing.TB, c valuesCase) []byte {
	t.Helper()
	args := append([]string{"template", "gpuwatch", chartDir, "--namespace", "gpuwatch"}, c.helmArgs()...)
	return runHelm(t, args...)
}

func TestHelmLint(t *testing.T) {
	for _, c := range valuesCases {
		t.Run(c.name, func(t *testing.T) {
			out := runHelm(t, append([]string{"lint", "--strict", chartDir}, c.helmArgs()...)...)
			if !bytes.Contains(out, []byte("0 chart(s) failed")) {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// TestValuesSchemaRejects: values.schema.json turns a misspelt or mistyped
// value into an install-time error instead of a silently ignored setting.
func TestValuesSchemaRejects(t *testing.T) {
	for _, set := range []string{
		"serviceMonitor.enable=true", // misspelt key
		"port=http",                  // not a number
		"log.level=verbose",          // not a level gpuwatch knows
		"compat=dcgm-exporter",       // not a naming scheme
		"compatDCGMVersion=4.7",      // not a version the flag knows
		"extraArgs[0]=compat=dcgm",   // not a flag
		"webConfig.basicAuth.users.x=plain-password",
		"collectors.gmp=false", // not a collector group
	} {
		t.Run(set, func(t *testing.T) {
			cmd := exec.Command(helmBin(t), "template", "gpuwatch", chartDir, "--set", set)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("helm template --set %s succeeded; want a schema error", set)
			}
			if !strings.Contains(string(out), "values don't meet the specifications of the schema") {
				t.Fatalf("helm template --set %s failed, but not on the schema:\n%s", set, out)
			}
		})
	}
}

// TestChartRefusesContradictions: settings that cannot work together fail
// with a message naming the value to change.
func TestChartRefusesContradictions(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"serviceMonitor.enabled=true", "podMonitor.enabled=true"}, "choose one"},
		{[]string{"serviceMonitor.enabled=true", "service.enabled=false"}, "needs service.enabled"},
		{[]string{"webConfig.tls.enabled=true"}, "webConfig.tls.secretName"},
		{[]string{"webConfig.basicAuth.enabled=true"}, "webConfig.basicAuth.users"},
		{[]string{"webConfig.basicAuth.enabled=true", "webConfig.basicAuth.users.p=" + testBcrypt, "serviceMonitor.enabled=true"}, "scrapeClient.basicAuthSecret.name"},
	} {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) {
			args := []string{"template", "gpuwatch", chartDir}
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			out, err := exec.Command(helmBin(t), args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("helm template %v: err=%v, want an error containing %q:\n%s", c.set, err, c.want, out)
			}
		})
	}
}

// String names a values case in messages.
func (c valuesCase) String() string { return fmt.Sprintf("values %q %v", c.name, c.set) }

// TestValuesSchemaKnowsEveryCollector: values.schema.json accepts exactly
// gpuwatch's collector groups under collectors, so a misspelt group fails
// the install instead of a pod that exits on an unknown flag.
func TestValuesSchemaKnowsEveryCollector(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Collectors struct {
				PropertyNames struct {
					Enum []string `json:"enum"`
				} `json:"propertyNames"`
			} `json:"collectors"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(snapshot.AllGroups), "slurm")
	got := schema.Properties.Collectors.PropertyNames.Enum
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("values.schema.json collectors accepts %v; gpuwatch's groups are %v", got, want)
	}
}
