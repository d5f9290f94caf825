package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestDocumentedDeployCommands checks the documented commands that cannot
// run here with the validators of what they name (testenv.DocCommands):
//   - helm install/upgrade: rendered word for word by helm template, the
//     objects decoded strictly; an upgrade with --reuse-values on top of its
//     page's install line;
//   - kubectl: rollout status names a DaemonSet the page's install line
//     renders in that namespace; create secret names a Secret the docs' helm
//     commands use; apply -f names a manifest that decodes strictly, and
//     create namespace the namespace of a manifest the page applies;
//   - systemd: the unit installed, enabled or edited exists in deploy/systemd
//     and passes systemd-analyze verify.
func TestDocumentedDeployCommands(t *testing.T) {
	cmds, err := testenv.DocCommands(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	checked := map[testenv.DocKind]int{}
	for _, c := range cmds {
		switch c.Kind {
		case testenv.DocHelm, testenv.DocKubectl, testenv.DocSystemd:
		default:
			continue
		}
		checked[c.Kind]++
		t.Run(fmt.Sprintf("%s:%d", c.Page, c.Line), func(t *testing.T) {
			t.Logf("%s", c.Text)
			switch c.Kind {
			case testenv.DocHelm:
				checkDocHelm(t, cmds, c)
			case testenv.DocKubectl:
				checkDocKubectl(t, cmds, c)
			case testenv.DocSystemd:
				checkDocSystemd(t, c)
			}
		})
	}
	for _, k := range []testenv.DocKind{testenv.DocHelm, testenv.DocKubectl, testenv.DocSystemd} {
		if checked[k] == 0 {
			t.Errorf("no documented %s command: is the extraction broken?", k)
		}
	}
}

// pageInstall is the helm install line of c's page.
func pageInstall(t *testing.T, cmds []testenv.DocCommand, c testenv.DocCommand) testenv.DocCommand {
	t.Helper()
	for _, o := range cmds {
		if o.Page == c.Page && o.Kind == testenv.DocHelm && len(o.Words) > 1 && o.Words[1] == "install" {
			return o
		}
	}
	t.Fatalf("%s: no helm install line on the page to apply this to", c)
	return testenv.DocCommand{}
}

// docHelmEnv is what a reader's shell has for the helm commands: a
// $PASSWORD, and an htpasswd (apache2-utils; not installed here) that
// prints ":HASH" for `htpasswd -nbBC 10 ” PASSWORD`, with a real bcrypt
// hash of the password.
func docHelmEnv(t *testing.T) (env []string, hash string) {
	t.Helper()
	const password = "documented-password"
	h, err := bcrypt.GenerateFromPassword([]byte(password), 10)
	if err != nil {
		t.Fatal(err)
	}
	shim := t.TempDir()
	if err := os.Symlink(helmBin(t), filepath.Join(shim, "helm")); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n[ \"$1\" = -nbBC ] && [ \"$3\" = '' ] && [ \"$4\" = \"$PASSWORD\" ] || exit 1\nprintf ':%s\\n' \"$DOC_BCRYPT\"\n"
	if err := os.WriteFile(filepath.Join(shim, "htpasswd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "PATH="+shim+":"+os.Getenv("PATH"), "PASSWORD="+password, "DOC_BCRYPT="+string(h)), string(h)
}

// renderDocHelm runs a helm command line through sh with helm template in
// place of install, and decodes what it renders.
func renderDocHelm(t *testing.T, script string, env []string) rendered {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = repoRoot
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the documented command fails: %s\n%v\n%s", script, err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("%s: prints to stderr:\n%s", script, stderr.String())
	}
	objs, err := decodeStrict(script, stdout.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return rendered{objects: objs}
}

func checkDocHelm(t *testing.T, cmds []testenv.DocCommand, c testenv.DocCommand) {
	env, hash := docHelmEnv(t)
	var script string
	switch {
	case c.Words[1] == "install":
		script = strings.Replace(c.Text, "helm install ", "helm template ", 1)
	case c.Words[1] == "upgrade" && slices.Contains(c.Words, "--install") && slices.Contains(c.Words, "--reuse-values"):
		// --reuse-values: the values of the install before, then these.
		install := strings.Replace(pageInstall(t, cmds, c).Text, "helm install ", "helm template ", 1)
		_, sets, ok := strings.Cut(c.Text, " --set")
		if !ok {
			t.Fatalf("%s: an upgrade that sets nothing", c)
		}
		script = install + " --set" + sets
	default:
		t.Fatalf("%s: no rule renders this helm command; add one", c)
	}
	r := renderDocHelm(t, script, env)
	ds := one[appsv1.DaemonSet](t, r)
	if ds == nil {
		t.Fatalf("%s renders no DaemonSet", c)
	}
	if strings.Contains(c.Text, "webConfig.basicAuth.users.prometheus=") {
		found := false
		for _, s := range all[corev1.Secret](r) {
			for _, v := range s.StringData {
				found = found || strings.Contains(v, `"prometheus": "`+hash+`"`)
			}
			for _, v := range s.Data {
				found = found || bytes.Contains(v, []byte(hash))
			}
		}
		if !found {
			t.Errorf("%s: no web configuration Secret holds the htpasswd hash for user prometheus", c)
		}
	}
}

func checkDocKubectl(t *testing.T, cmds []testenv.DocCommand, c testenv.DocCommand) {
	w := c.Words
	ns := ""
	if i := slices.Index(w, "-n"); i >= 0 && i+1 < len(w) {
		ns = w[i+1]
		w = slices.Delete(slices.Clone(w), i, i+2)
	}
	switch {
	case len(w) >= 4 && w[1] == "rollout" && w[2] == "status":
		kind, name, _ := strings.Cut(w[3], "/")
		if kind != "ds" && kind != "daemonset" {
			t.Fatalf("%s: no rule for kubectl rollout status of a %s", c, kind)
		}
		install := pageInstall(t, cmds, c)
		if !strings.Contains(install.Text, " -n "+ns+" ") {
			t.Errorf("%s: the page installs into another namespace than %q: %s", c, ns, install.Text)
		}
		env, _ := docHelmEnv(t)
		ds := one[appsv1.DaemonSet](t, renderDocHelm(t, strings.Replace(install.Text, "helm install ", "helm template ", 1), env))
		if ds == nil || ds.Name != name {
			t.Errorf("%s: the install line renders no DaemonSet %q", c, name)
		}
	case len(w) >= 5 && w[1] == "create" && w[2] == "secret":
		name := w[4]
		used := slices.ContainsFunc(cmds, func(o testenv.DocCommand) bool {
			return o.Kind == testenv.DocHelm && o.Page == c.Page && strings.Contains(o.Text, "="+name)
		})
		if !used {
			t.Errorf("%s: no helm command of the page uses the Secret %s", c, name)
		}
	case len(w) == 4 && w[1] == "create" && w[2] == "namespace":
		// The namespace is the one the page's manifests go into.
		applied := slices.ContainsFunc(cmds, func(o testenv.DocCommand) bool {
			if o.Page != c.Page || o.Kind != testenv.DocKubectl || !slices.Contains(o.Words, "apply") {
				return false
			}
			data, err := os.ReadFile(filepath.Join(repoRoot, o.Words[len(o.Words)-1]))
			return err == nil && strings.Contains(string(data), "\n  namespace: "+w[3]+"\n")
		})
		if !applied {
			t.Errorf("%s: no manifest the page applies goes into namespace %s", c, w[3])
		}
	case len(w) >= 4 && w[1] == "apply" && w[2] == "-f":
		data, err := os.ReadFile(filepath.Join(repoRoot, w[3]))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeStrict(w[3], data); err != nil {
			t.Error(err)
		}
	default:
		t.Fatalf("%s: no rule checks this kubectl command; add one", c)
	}
}

func checkDocSystemd(t *testing.T, c testenv.DocCommand) {
	var unit string
	switch {
	case c.Program() == "install":
		for _, w := range c.Words {
			if strings.HasPrefix(w, "deploy/systemd/") {
				unit = filepath.Base(w)
			}
		}
	case len(c.Words) == 2 && c.Words[1] == "daemon-reload":
		return // names nothing
	case len(c.Words) >= 3 && slices.Contains([]string{"enable", "edit", "restart", "start", "status"}, c.Words[1]):
		unit = c.Words[len(c.Words)-1] + ".service"
	default:
		t.Fatalf("%s: no rule checks this systemd command; add one", c)
	}
	path := filepath.Join(repoRoot, "deploy", "systemd", unit)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: no unit %s in deploy/systemd", c, unit)
	}
	analyze := testenv.RequireTool(t, "systemd-analyze", "systemd")
	out, err := exec.Command(analyze, "verify", installedUnit(t, path)).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("%s: systemd-analyze verify %s: %v\n%s", c, unit, err, out)
	}
}
