//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The per-GPU history: one day at a 5-minute resolution on node-c, three
// GPUs allocated to pod ml/big, each with a process of dave.
//
//	GPU c0: 90 % busy the first 12 hours, 50 % the next 12; dave's SM share the same.
//	GPU c1: 100 % busy; dave's processes (MPS) sum to an SM share of 130 %.
//	GPU c2: MIG mode: no utilization reading at all, no SM share.
//
// Every GPU: 300 W, 10 GiB used, all by dave.
//
// By hand, per GPU: dave held 72 GPU-hours, 48 of them with a reading (24 on
// c2 without); used 0.9×12 + 0.5×12 + 1.0×24 = 40.8 GPU-hours (c1's 130 %
// counts as the whole GPU, 100 %), mean 40.8/48 = 85 %; at each step the
// mean over the measured GPUs is (0.9+1)/2 = 95 % or (0.5+1)/2 = 75 %, half
// the steps each, so the p95 is 95 %. Summed: 30 GiB, 3 × 300 W × 24 h =
// 21.6 kWh.
func writePerGPUHistory(t *testing.T, path string, start time.Time) {
	t.Helper()
	type gpu struct{ id, uuid string }
	gpus := []gpu{{"0", "GPU-c0"}, {"1", "GPU-c1"}, {"2", "GPU-c2"}}
	util := map[string]func(k int) (float64, bool){
		"GPU-c0": func(k int) (float64, bool) {
			if k <= stepsPerDay/2 {
				return 0.9, true
			}
			return 0.5, true
		},
		"GPU-c1": func(int) (float64, bool) { return 1, true },
		"GPU-c2": func(int) (float64, bool) { return 0, false },
	}
	share := map[string]func(k int) (float64, bool){
		"GPU-c0": util["GPU-c0"],
		"GPU-c1": func(int) (float64, bool) { return 1.3, true },
		"GPU-c2": func(int) (float64, bool) { return 0, false },
	}
	var b strings.Builder
	family := func(name string, labels func(g gpu) string, value func(g gpu, k int) (float64, bool)) {
		fmt.Fprintf(&b, "# TYPE %s gauge\n", name)
		for _, g := range gpus {
			for k := 1; k <= stepsPerDay; k++ {
				if v, ok := value(g, k); ok {
					fmt.Fprintf(&b, "%s{%s} %g %d\n", name, labels(g), v, start.Add(time.Duration(k)*reportStep).Unix())
				}
			}
		}
	}
	dev := func(g gpu) string {
		return fmt.Sprintf(`job="gpuwatch",instance="node-c:9410",gpu=%q,uuid=%q`, g.id, g.uuid)
	}
	constant := func(v float64) func(gpu, int) (float64, bool) {
		return func(gpu, int) (float64, bool) { return v, true }
	}
	family("gpu_up", dev, constant(1))
	family("gpu_utilization_ratio", dev, func(g gpu, k int) (float64, bool) { return util[g.uuid](k) })
	family("gpu_power_usage_watts", dev, constant(300))
	family("gpu_memory_used_bytes", dev, constant(10<<30))
	family("gpu_kubernetes_allocation_info", func(g gpu) string {
		mig := ""
		if g.uuid == "GPU-c2" {
			mig = "MIG-c2-1"
		}
		return dev(g) + fmt.Sprintf(`,namespace="ml",pod="big",container="train",mig_uuid=%q`, mig)
	}, constant(1))
	proc := func(g gpu) string {
		return dev(g) + `,user="dave",container="train",pod="big",namespace="ml",slurm_job="",compose_project="",compose_service=""`
	}
	family("gpu_process_memory_used_bytes", proc, constant(10<<30))
	family("gpu_process_sm_utilization_ratio", proc, func(g gpu, k int) (float64, bool) { return share[g.uuid](k) })
	b.WriteString("# EOF\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReportFiguresPerGPU: utilization is per GPU (never above 100 %, an
// owner of several GPUs is not summed), memory and energy are summed, and a
// GPU without a utilization reading is absent from every utilization figure
// and counted apart, never 0 %: against a real Prometheus, figure by figure.
func TestReportFiguresPerGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	start := reportHistoryStart()
	tsdb := backfill(t, start, writePerGPUHistory)
	url := "http://" + startPrometheusOn(t, tsdb)
	testenv.WaitFor(t, 60*time.Second, "Prometheus to load the history", func() bool {
		v, ok := promQuery(t, url, fmt.Sprintf(`count(gpu_up @ %d)`, start.Add(time.Hour).Unix()))
		return ok && v == 3
	})
	args := []string{"--prometheus.url=" + url, "--from=" + start.Format(time.RFC3339), "--to=" + start.Add(24*time.Hour).Format(time.RFC3339), "--step=5m", "--no-rules"}
	whole := figures{72, 40.8, 0.85, 0.95, 30, 30, 21.6, 0, 0, 24}
	for by, want := range map[string]map[string]figures{
		"user": {"dave": whole},
		"pod":  {"ml/big": whole},
		"node": {"node-c:9410": whole},
		"gpu": {
			"node-c:9410/0/GPU-c0": {24, 16.8, 0.7, 0.9, 10, 10, 7.2, 0, 0, 0},
			"node-c:9410/1/GPU-c1": {24, 24, 1, 1, 10, 10, 7.2, 0, 0, 0},
			"node-c:9410/2/GPU-c2": {24, na, na, na, 10, 10, 7.2, 0, 0, 24},
		},
	} {
		out, code := runReport(t, append(args, "--by="+by, "--format=json")...)
		if code != 0 {
			t.Errorf("--by=%s: exit %d\n%s", by, code, out)
			continue
		}
		checkFigures(t, by, decodeReport(t, out), want, 1e-9)
		var r reportJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if r.Fleet.GPUs != 3 || r.Fleet.Unmeasured != 1 || !testenv.Near(r.Fleet.Util, 0.85, 1e-9) || !testenv.Near(r.Fleet.Energy, 21.6, 1e-9) || r.Fleet.Idle != 0 {
			t.Errorf("--by=%s: fleet %+v, want 3 GPUs, 1 without utilization, 85 %% per GPU, 21.6 kWh, no idle hours", by, r.Fleet)
		}
	}
	table, code := runReport(t, append(args, "--by=gpu", "--format=table")...)
	c2 := ""
	for line := range strings.SplitSeq(table, "\n") {
		if strings.Contains(line, "GPU-c2") {
			c2 = strings.Join(strings.Fields(line), " ")
		}
	}
	if code != 0 || c2 != "node-c:9410 2 GPU-c2 24.0 n/a n/a n/a 10.0 10.0 7.20 0.0 24.0" ||
		!strings.Contains(table, "mean util % per GPU") || !strings.Contains(table, "Fleet: 3 GPUs (1 without a utilization reading), mean utilization per GPU 85.0 %") {
		t.Errorf("--by=gpu table (exit %d), GPU-c2 row %q:\n%s", code, c2, table)
	}
}

// TestReportFirstMinutesOfData: the README's report command, right after
// Prometheus began scraping gpuwatch, uses the data there is instead of
// failing with "no data" until a whole step has passed.
func TestReportFirstMinutesOfData(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	exposition := `gpu_up{gpu="0",uuid="GPU-0"} 1
gpu_up{gpu="1",uuid="GPU-1"} 1
gpu_utilization_ratio{gpu="0",uuid="GPU-0"} 0.5
gpu_utilization_ratio{gpu="1",uuid="GPU-1"} 0.25
gpu_power_usage_watts{gpu="0",uuid="GPU-0"} 100
gpu_power_usage_watts{gpu="1",uuid="GPU-1"} 100
gpu_memory_used_bytes{gpu="0",uuid="GPU-0"} 1073741824
gpu_memory_used_bytes{gpu="1",uuid="GPU-1"} 0
gpu_kubernetes_allocation_info{gpu="0",uuid="GPU-0",namespace="ml",pod="p",container="c",mig_uuid=""} 1
`
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write([]byte(exposition))
	})}
	go target.Serve(ln)
	t.Cleanup(func() { target.Close() })

	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: gpuwatch\n    static_configs: [{targets: [%q]}]\n", ln.Addr().String()))
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	testenv.StartProcess(t, nil, promBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr)
	url := "http://" + addr
	// A few scrapes: the newest second of data is below the report's 1s
	// resolution.
	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape the GPUs three times", func() bool {
		v, ok := promQuery(t, url, `count(count_over_time(gpu_up[1m]) >= 3)`)
		return ok && v == 2
	})
	for _, rng := range [][]string{{"--last=7d"}, {"--last=2h", "--step=1h"}} {
		out, code := runReport(t, append([]string{"--prometheus.url=" + url, "--by=namespace", "--format=json"}, rng...)...)
		if code != 0 {
			t.Errorf("%v: exit %d\n%s", rng, code, out)
			continue
		}
		got := decodeReport(t, out)
		var r reportJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		ml, ok := got["ml"]
		if !ok || ml.alloc <= 0 || !testenv.Near(ml.mean, 0.5, 1e-9) || !testenv.Near(ml.p95, 0.5, 1e-9) || r.Fleet.GPUs != 2 || !testenv.Near(r.Fleet.Util, 0.375, 1e-9) {
			t.Errorf("%v: rows %+v, fleet %+v; want ml at 50 %% per GPU, 2 GPUs at 37.5 %%\n%s", rng, got, r.Fleet, out)
		}
	}
}

// TestReportHidesURLPassword: a password in --prometheus.url shows in no
// output (JSON server field, HTML footer, table) and no error.
func TestReportHidesURLPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	start := reportHistoryStart()
	url := sharedHistoryPrometheus(t, start)
	secret := strings.Replace(url, "http://", "http://admin:S3cretPW@", 1)
	rangeArgs := []string{"--from=" + start.Format(time.RFC3339), "--to=" + start.Add(24*time.Hour).Format(time.RFC3339)}
	page := filepath.Join(t.TempDir(), "report.html")
	closed := fmt.Sprintf("http://admin:S3cretPW@127.0.0.1:%d", testenv.FreePort(t))
	for _, c := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"json", append([]string{"--prometheus.url=" + secret, "--format=json"}, rangeArgs...), true},
		{"table", append([]string{"--prometheus.url=" + secret}, rangeArgs...), true},
		{"html", append([]string{"--prometheus.url=" + secret, "--format=html", "--output=" + page}, rangeArgs...), true},
		{"no data", []string{"--prometheus.url=" + secret, "--from=" + start.AddDate(0, 0, -2).Format(time.RFC3339), "--to=" + start.AddDate(0, 0, -1).Format(time.RFC3339)}, false},
		{"unreachable", append([]string{"--prometheus.url=" + closed, "--prometheus.retries=0"}, rangeArgs...), false},
		{"unparsable", append([]string{"--prometheus.url=http://admin:S3cretPW%zz@127.0.0.1:1"}, rangeArgs...), false},
	} {
		out, code := runReport(t, c.args...)
		if (code == 0) != c.ok || strings.Contains(out, "S3cretPW") {
			t.Errorf("%s: exit %d, output:\n%s\nwant success %v and no password", c.name, code, out, c.ok)
		}
		if c.name == "json" {
			var r reportJSON
			if err := json.Unmarshal([]byte(out), &r); err != nil || r.Server != strings.Replace(url, "http://", "http://admin:xxxxx@", 1) {
				t.Errorf("json: server %q (%v), want the URL with the password redacted", r.Server, err)
			}
		}
	}
	html, err := os.ReadFile(page)
	if err != nil || strings.Contains(string(html), "S3cretPW") || !strings.Contains(string(html), "admin:xxxxx@") {
		t.Errorf("html footer: %v\n%s", err, html)
	}
}
