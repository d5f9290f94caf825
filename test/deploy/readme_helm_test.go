package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// installCommands returns the `helm install` commands of page's sh code
// blocks, as testenv.DocCommands reads them (continuation lines joined).
func installCommands(t *testing.T, page string) []string {
	t.Helper()
	cmds, err := testenv.DocCommands(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cmds {
		if c.Page == page && c.Kind == testenv.DocHelm && c.Words[1] == "install" {
			out = append(out, c.Text)
		}
	}
	return out
}

// compatSpans returns the inline code spans of doc that set the chart's
// compat value: what a reader adds to the install line.
func compatSpans(doc string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`(--set[^`]* '?compat=[^`]*)`").FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// renderDocumented runs a documented helm install command, word for word,
// through sh (so quotes and backslashes mean what they mean to a reader's
// shell), with `helm install` turned into `helm template` and helm the
// tests' own. It returns the rendered objects.
func renderDocumented(t *testing.T, command string) rendered {
	t.Helper()
	shim := t.TempDir()
	if err := os.Symlink(helmBin(t), filepath.Join(shim, "helm")); err != nil {
		t.Fatal(err)
	}
	script := strings.Replace(command, "helm install ", "helm template ", 1)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "PATH="+shim+":"+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the documented command fails: %s\n%v\n%s", command, err, stderr.String())
	}
	objs, err := decodeStrict(command, stdout.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return rendered{objects: objs}
}

// TestDocumentedHelmCommandsRender renders the install line of docs/deployment.md
// and of the chart's README exactly as written, and that line with each
// documented compat setting added: each must render, the install line's
// NetworkPolicy admit kube-prometheus-stack's Prometheus in "monitoring"
// and nobody else, and compat reach gpuwatch as --compat=dcgm,native.
func TestDocumentedHelmCommandsRender(t *testing.T) {
	for _, path := range []string{"docs/deployment.md", "deploy/helm/gpuwatch/README.md"} {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(repoRoot, path))
			if err != nil {
				t.Fatal(err)
			}
			doc := string(data)
			installs := installCommands(t, path)
			if len(installs) != 1 {
				t.Fatalf("%d helm install commands in %s, want the one install line: %q", len(installs), path, installs)
			}
			install := installs[0]
			r := renderDocumented(t, install)
			np := one[networkingv1.NetworkPolicy](t, r)
			if np == nil {
				t.Fatalf("the install line renders no NetworkPolicy: %s", install)
			}
			checkNetworkPolicy(t, r, np,
				[]peerPod{kubePrometheusStackPod, oldOperatorPod},
				[]peerPod{grafanaPod, notebookPod, impostorPod})

			spans := compatSpans(doc)
			if len(spans) == 0 {
				t.Fatalf("%s documents no compat setting", path)
			}
			for _, span := range spans {
				r := renderDocumented(t, install+" "+span)
				ds := one[appsv1.DaemonSet](t, r)
				if args := ds.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--compat=dcgm,native") {
					t.Errorf("install line + %s: gpuwatch's args %q lack --compat=dcgm,native", span, args)
				}
			}
		})
	}
}
