// Package e2e drives the built gpuwatch binary against real Prometheus,
// promtool and friends. The simulator stands in for GPUs; everything else
// is the real thing.
package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

var gpuwatchBin string

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithGpuwatch(m, "e2e", &gpuwatchBin))
}

// syncBuffer collects a child's output for failure messages.
type syncBuffer = testenv.SyncBuffer

// process is a running child: gpuwatch or prometheus.
type process struct {
	cmd    *exec.Cmd
	output *syncBuffer
	done   chan struct{}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	return startProcessEnv(t, nil, bin, args...)
}

// startProcessEnv is startProcess with the environment env (nil: this
// process's).
func startProcessEnv(t *testing.T, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), output: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), p.output.String())
		}
	})
	return p
}

// startGpuwatch runs `gpuwatch serve` on a free port with the given flags and
// waits until it answers /healthz. It returns the base URL.
func startGpuwatch(t *testing.T, args ...string) (string, *process) {
	t.Helper()
	port := testenv.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p := startProcess(t, gpuwatchBin, append([]string{"--web.listen-address=" + addr}, args...)...)
	base := "http://" + addr
	waitForHealthz(t, p, base)
	return base, p
}

// waitForHealthz waits until the gpuwatch p answers base/healthz.
func waitForHealthz(t *testing.T, p *process, base string) {
	t.Helper()
	testenv.WaitFor(t, 15*time.Second, "gpuwatch to answer /healthz", func() bool {
		if p.exited() {
			t.Fatalf("gpuwatch exited early:\n%s", p.output.String())
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return string(body)
}

// parseMetrics parses a text exposition into metric families.
func parseMetrics(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing exposition: %v\n%s", err, text)
	}
	return families
}

// sample returns the value of the series of family name whose labels
// include all of want, and whether it exists.
func sample(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf, ok := families[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// httpGetNoFail is httpGet for polling: errors are returned, not fatal.
func httpGetNoFail(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}
