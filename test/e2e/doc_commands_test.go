//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// docWrapper is gpuwatch as the documented commands run it here, on PATH and
// as ./bin/gpuwatch of the sandbox checkout:
//   - DOC_DEMO=1 adds --backend=sim --sim.profile=dgx-h100 when the command
//     names no backend: CI has no GPU, so "gpuwatch ps" means the demo;
//   - DOC_LISTEN adds --web.listen-address to a serve (no subcommand, or
//     serve): the docs' :9410 is taken by others on a shared machine.
//
// The test sets both from its own parse of the command; nothing of the
// docs is interpolated into this script.
const docWrapper = `#!/bin/sh
sub=
for a in "$@"; do case "$a" in -*) ;; *) sub=$a; break ;; esac; done
if [ -n "$DOC_LISTEN" ] && { [ -z "$sub" ] || [ "$sub" = serve ]; }; then
  set -- "$@" "--web.listen-address=$DOC_LISTEN"
fi
if [ -n "$DOC_DEMO" ]; then
  for a in "$@"; do case "$a" in --backend|--backend=*) exec "$DOC_GPUWATCH" "$@" ;; esac; done
  set -- "$@" --backend=sim --sim.profile=dgx-h100
fi
exec "$DOC_GPUWATCH" "$@"
`

// docSandbox is a directory that looks like a built checkout to the
// documented commands: bin/gpuwatch (docWrapper), build/fakenvml, scripts/.
type docSandbox struct {
	dir string
	env []string
}

func newDocSandbox(t *testing.T) *docSandbox {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(filepath.Join(dir, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "gpuwatch"), []byte(docWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		filepath.Join(dir, "build", "fakenvml"): fakeNVMLDir(t),
		filepath.Join(dir, "scripts"):           filepath.Join(testenv.RepoRoot(), "scripts"),
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PWD="+dir,
		"DOC_GPUWATCH="+gpuwatchBin,
		"GPUWATCH_BIN="+filepath.Join(bin, "gpuwatch"), // ./scripts/run.sh runs it instead of building
	)
	return &docSandbox{dir: dir, env: env}
}

// command is the documented command c as a reader's bash runs it in the
// sandbox, the URLs of the docs' servers replaced by the test's. bash (not
// dash) execs a lone command, so a serve's own exit status is the one
// waited for.
func (s *docSandbox) command(ctx context.Context, c testenv.DocCommand, replace map[string]string, extraEnv ...string) *exec.Cmd {
	text := c.Text
	for from, to := range replace {
		text = strings.ReplaceAll(text, from, to)
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir = s.dir
	cmd.Env = append(append([]string{}, s.env...), extraEnv...)
	// Its own process group: stopping a serve stops sh, run.sh and gpuwatch.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// demoEnv is DOC_DEMO for a gpuwatch command that reads GPUs and names no
// backend: CI machines have no GPU, so the docs' "gpuwatch ps" runs on the
// simulated dgx-h100. ./scripts/run.sh is left alone: its own fallback to
// the demo is what the README promises.
func demoEnv(c testenv.DocCommand) []string {
	if c.Program() == "./scripts/run.sh" || c.HasFlag("backend") {
		return nil
	}
	switch c.Subcommand() {
	case "", "serve", "ps", "doctor":
		return []string{"DOC_DEMO=1"}
	}
	return nil
}

// TestDocumentedCommandsRun runs every gpuwatch command of the docs' sh
// blocks (testenv.DocCommands: serve, one-shot, report, curl) word for word
// through bash, in a sandbox that looks like a built checkout. A serve is
// started, must answer /healthz and serve gpu_up, and is stopped; curl runs
// against a shared demo gpuwatch (the Slurm collector's curl against one
// with the gpuwatch-slurm unit's flags on a real Slurm); report runs
// against a real Prometheus that scraped the shared gpuwatch, the docs'
// http(s)://prometheus:9090 mapped to it. Every command must exit 0 and
// print what it is documented to print. Commands that cannot run here are
// checked in docs/, test/deploy and deploy/compose.
func TestDocumentedCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and Slurm; skipped with -short")
	}
	cmds, err := testenv.DocCommands(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	sandbox := newDocSandbox(t)
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile=dgx-h100")
	gpuwatchAddr := strings.TrimPrefix(base, "http://")
	var prom *docPrometheus
	ran := 0
	parent := t // the shared Prometheus outlives the subtest that starts it
	for _, c := range cmds {
		switch c.Kind {
		case testenv.DocServe, testenv.DocGpuwatch, testenv.DocReport, testenv.DocCurl:
		default:
			continue
		}
		ran++
		t.Run(fmt.Sprintf("%s:%d", c.Page, c.Line), func(t *testing.T) {
			t.Logf("%s", c.Text)
			switch c.Kind {
			case testenv.DocServe:
				runDocServe(t, sandbox, c)
			case testenv.DocGpuwatch:
				out := runDocCommand(t, sandbox, c, nil, demoEnv(c)...)
				checkDocOutput(t, c, out)
			case testenv.DocCurl:
				addr := gpuwatchAddr
				if strings.Contains(c.Text, "slurm_") {
					addr = slurmGpuwatch(t)
				}
				out := runDocCommand(t, sandbox, c, map[string]string{"localhost:9410": addr})
				checkDocOutput(t, c, out)
			case testenv.DocReport:
				if prom == nil {
					prom = startDocPrometheus(parent, sandbox, gpuwatchAddr)
				}
				out := runDocCommand(t, sandbox, prom.window(c), prom.replace)
				checkDocReport(t, sandbox, c, out)
			}
		})
	}
	if ran < 10 {
		t.Errorf("only %d gpuwatch commands in the docs: is the extraction broken?", ran)
	}
}

// runDocCommand runs c to completion (2 minutes at most) and returns its
// output; a non-zero exit fails the test.
func runDocCommand(t *testing.T, s *docSandbox, c testenv.DocCommand, replace map[string]string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := s.command(ctx, c, replace, env...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", c, err, out)
	}
	return string(out)
}

// runDocServe starts a documented serve on a free port, waits for /healthz,
// checks it serves gpu_up, and stops it with SIGTERM.
func runDocServe(t *testing.T, s *docSandbox, c testenv.DocCommand) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := &testenv.SyncBuffer{}
	cmd := s.command(ctx, c, nil, append(demoEnv(c), "DOC_LISTEN="+addr)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err := <-done:
			// gpuwatch ends a serve with status 0 on SIGTERM (bash, run.sh
			// and the wrapper exec it, so it is the process waited for).
			if err != nil && !t.Failed() {
				t.Errorf("%s: after SIGTERM: %v\n%s", c, err, out)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s: still running 30 s after SIGTERM\n%s", c, out)
			cancel()
			<-done
		}
	}()
	testenv.WaitFor(t, 60*time.Second, "the documented serve to answer /healthz", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("%s exited early: %v\n%s", c, err, out)
		default:
		}
		_, err := httpGetNoFail("http://" + addr + "/healthz")
		return err == nil
	})
	metrics := httpGet(t, "http://"+addr+"/metrics")
	if _, ok := testenv.Sample(testenv.ParseMetrics(t, metrics), "gpu_up", map[string]string{"gpu": "0"}); !ok {
		t.Errorf("%s: serves no gpu_up for GPU 0:\n%.2000s", c, metrics)
	}
	if c.Program() == "./scripts/run.sh" && !c.HasFlag("backend") && !strings.Contains(out.String(), "DEMO") {
		if _, err := os.Stat("/dev/nvidiactl"); err != nil {
			t.Errorf("%s: no demo banner on a machine without a driver:\n%s", c, out)
		}
	}
}

// checkDocOutput holds a one-shot command's output to what its page says it
// prints.
func checkDocOutput(t *testing.T, c testenv.DocCommand, out string) {
	t.Helper()
	var want []string
	switch {
	case c.Kind == testenv.DocCurl && strings.Contains(c.Text, "| grep"):
		// grep exits 0 only on a match; the match must be the metric.
		word := strings.Trim(strings.Fields(c.Text[strings.Index(c.Text, "| grep")+len("| grep"):])[0], "'\"^")
		want = []string{word}
	case c.Kind == testenv.DocCurl:
		// The JSON API: one object, with the first field the page shows.
		if !json.Valid([]byte(out)) || !strings.HasPrefix(out, "{") {
			t.Fatalf("%s: not a JSON object:\n%.2000s", c, out)
		}
		want = []string{documentedKey(c)}
	case c.Subcommand() == "ps" && !c.HasFlag("backend=nvml"):
		want = []string{"GPU", "PID", "alice"} // the demo's owners
	case c.Subcommand() == "ps":
		want = []string{"GPU", "PID", "compute"} // the fake library's processes have no owner here
	case c.Subcommand() == "doctor":
		want = []string{"driver"}
	case c.Subcommand() == "metrics":
		want = []string{"gpu_utilization_ratio", "gpu_up"}
	}
	if want == nil {
		t.Fatalf("%s: the test knows no expected output for this command; add it", c)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q:\n%.3000s", c, w, out)
		}
	}
}

// documentedKey is the first JSON key of the output a console transcript
// shows under command c.
func documentedKey(c testenv.DocCommand) string {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), c.Page))
	if err != nil {
		return ""
	}
	lines := strings.Split(string(data), "\n")
	if c.Line < len(lines) {
		if m := regexp.MustCompile(`^\{"(\w+)":`).FindStringSubmatch(lines[c.Line]); m != nil {
			return `"` + m[1] + `":`
		}
	}
	return "{"
}

// docPrometheus is a real Prometheus scraping the shared demo gpuwatch with
// the shipped rules, over HTTP and, through a TLS proxy, over HTTPS for the
// docs' --prometheus.http-config example.
type docPrometheus struct {
	replace map[string]string
}

// window maps the docs' fixed month (--from=2026-11-01 --to=2026-12-01),
// which this Prometheus does not hold, to the last three minutes, which
// hold its samples of the demo at the report's last step (now); the
// default step (1 m) needs a range longer than it.
func (p *docPrometheus) window(c testenv.DocCommand) testenv.DocCommand {
	now := time.Now()
	c.Text = regexp.MustCompile(`--from=\S+`).ReplaceAllString(c.Text, fmt.Sprintf("--from=%d", now.Add(-3*time.Minute).Unix()))
	c.Text = regexp.MustCompile(`--to=\S+`).ReplaceAllString(c.Text, fmt.Sprintf("--to=%d", now.Unix()))
	return c
}

func startDocPrometheus(t *testing.T, s *docSandbox, gpuwatchAddr string) *docPrometheus {
	t.Helper()
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	root := testenv.RepoRoot()
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%q, %q]\n"+
		"scrape_configs:\n  - job_name: gpuwatch\n    static_configs: [{targets: [%q]}]\n",
		filepath.Join(root, "deploy/prometheus/recording.yml"), filepath.Join(root, "deploy/prometheus/alerts.yml"), gpuwatchAddr))
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	testenv.StartProcess(t, nil, promBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	promURL := "http://" + addr

	// HTTPS in front of it, with the CA in the client.yml the docs name.
	target, _ := url.Parse(promURL)
	proxy := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	proxy.StartTLS()
	t.Cleanup(proxy.Close)
	writeFile(t, filepath.Join(dir, "ca.pem"), string(pemCert(proxy.TLS)))
	writeFile(t, filepath.Join(s.dir, "client.yml"), "tls_config:\n  ca_file: "+filepath.Join(dir, "ca.pem")+"\n")

	testenv.WaitFor(t, 90*time.Second, "Prometheus to scrape the demo's owners", func() bool {
		v, ok := promQuery(t, promURL, `count(count_over_time(gpu_process_memory_used_bytes[5m]) >= 3)`)
		return ok && v > 0
	})
	return &docPrometheus{replace: map[string]string{
		"http://prometheus:9090":  promURL,
		"https://prometheus:9090": proxy.URL,
	}}
}

// pemCert is the PEM of a TLS config's first certificate.
func pemCert(c *tls.Config) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificates[0].Certificate[0]})
}

// slurmGpuwatch starts gpuwatch as the gpuwatch-slurm unit runs it (its
// ExecStart's flags) on a real single-node Slurm with one running job, and
// returns its address.
func slurmGpuwatch(t *testing.T) string {
	t.Helper()
	unit, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "systemd", "gpuwatch-slurm.service"))
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for line := range strings.SplitSeq(string(unit), "\n") {
		if cmd, ok := strings.CutPrefix(line, "ExecStart="); ok {
			for _, w := range strings.Fields(cmd)[1:] {
				if !strings.HasPrefix(w, "$") { // the environment file's options: none by default
					args = append(args, w)
				}
			}
		}
	}
	if len(args) == 0 {
		t.Fatal("gpuwatch-slurm.service has no ExecStart")
	}
	cluster := testenv.StartSlurm(t, 1)
	job := cluster.Sbatch(t, "-J", "docs", "--wrap", "sleep 300")
	t.Cleanup(func() { cluster.Run(t, "scancel", job) })
	cluster.WaitJob(t, job, "RUNNING", "None")
	base, _ := startGpuwatch(t, append(args, "--slurm.poll-interval=1s")...)
	testenv.WaitFor(t, 30*time.Second, "slurm_jobs for the running job", func() bool {
		_, ok := testenv.Sample(testenv.ParseMetrics(t, httpGet(t, base+"/metrics")), "slurm_jobs", map[string]string{"state": "running"})
		return ok
	})
	return strings.TrimPrefix(base, "http://")
}

// demoReportOwners is an owner of the dgx-h100 demo for each documented --by.
var demoReportOwners = map[string]string{"namespace": "inference", "pod": "vllm-0", "account": "ml-research", "user": "alice"}

// checkDocReport holds a report's output (or its --output file) to its
// --format and --by: a report of that format naming an owner of the demo.
func checkDocReport(t *testing.T, s *docSandbox, c testenv.DocCommand, out string) {
	t.Helper()
	var by string
	for _, w := range c.Words {
		if name, ok := strings.CutPrefix(w, "--output="); ok {
			data, err := os.ReadFile(filepath.Join(s.dir, name))
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			out = string(data)
		}
		if v, ok := strings.CutPrefix(w, "--by="); ok {
			by = v
		}
	}
	owner, ok := demoReportOwners[by]
	if !ok {
		t.Fatalf("%s: the test knows no demo owner for --by=%s; add one", c, by)
	}
	want := []string{"GPU usage by " + by, owner}
	switch {
	case strings.Contains(c.Text, "--format=csv"):
		want = []string{by + ",", owner + ","}
	case strings.Contains(c.Text, "--format=html"):
		want = append(want, "<html")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: the report lacks %q:\n%.3000s", c, w, out)
		}
	}
}

// inlineGpuwatchRE matches a gpuwatch command in an inline code span.
var inlineGpuwatchRE = regexp.MustCompile("`(?:\\./bin/)?gpuwatch((?: --?[a-z][^`\\s]*| [a-z]+)*)`")

// TestDocumentedInlineGpuwatchFlagsExist: the gpuwatch commands of the
// docs' inline code spans (`gpuwatch ps --gpu=3`) are too many to run, and
// some serve forever; each is parsed by the binary (its words and --help),
// so a renamed or removed subcommand or flag fails here with its page.
// Spans that are syntax summaries ([--gpu=N], …) are not commands.
func TestDocumentedInlineGpuwatchFlagsExist(t *testing.T) {
	pages, err := testenv.DocPages(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range inlineGpuwatchRE.FindAllStringSubmatch(string(data), -1) {
			args := strings.Fields(m[1])
			if len(args) > 0 && args[0] == "started" { // the start log's message, not a command
				continue
			}
			n++
			out, code := runGpuwatch(t, append(args, "--help")...)
			if code != 0 {
				t.Errorf("%s: %s: gpuwatch does not parse it (exit %d):\n%s", page, m[0], code, out)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d inline gpuwatch commands in the docs: is the extraction broken?", n)
	}
}
