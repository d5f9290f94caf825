//go:build linux

// Command report measures `gpuwatch report` on a large fleet: it streams a
// month of simulated history for N GPUs into a VictoriaMetrics it starts,
// then times the report for several --by and records the report process's
// peak RSS. The point is that the client's memory does not grow with the
// fleet or the range: every figure is aggregated in the server.
//
//	go run ./bench/report -bin bin/gpuwatch -gpus 1000 -days 30
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/gpuwatch", "gpuwatch binary")
	vmBin := flag.String("victoria-metrics", "victoria-metrics", "VictoriaMetrics binary")
	gpus := flag.Int("gpus", 1000, "GPUs in the fleet (4 per node)")
	days := flag.Int("days", 30, "days of history")
	res := flag.Duration("resolution", 15*time.Minute, "sample interval of the history")
	flag.Parse()

	dir, err := os.MkdirTemp("", "report-bench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	addr := freeAddr()
	vm := exec.Command(*vmBin, "-storageDataPath="+filepath.Join(dir, "vm"), "-httpListenAddr="+addr, "-retentionPeriod=1y",
		"-search.maxStalenessInterval="+(*res-time.Minute).String(), "-loggerLevel=ERROR")
	if err := vm.Start(); err != nil {
		log.Fatal(err)
	}
	defer vm.Process.Kill()
	url := "http://" + addr
	for i := 0; ; i++ {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 100 {
			log.Fatal("VictoriaMetrics did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}

	end := time.Now().UTC().Truncate(24 * time.Hour)
	start := end.AddDate(0, 0, -*days)
	t0 := time.Now()
	samples := ingest(url, start, end, *gpus, *res)
	if resp, err := http.Get(url + "/internal/force_flush"); err == nil {
		resp.Body.Close()
	}
	fmt.Printf("history: %d GPUs, %d days at %s: %d samples ingested in %s\n", *gpus, *days, *res, samples, time.Since(t0).Round(time.Second))
	time.Sleep(2 * time.Second)

	fmt.Println("| --by | rows | wall time | peak RSS of gpuwatch report |")
	fmt.Println("|---|---|---|---|")
	for _, by := range []string{"namespace", "pod", "node", "gpu"} {
		cmd := exec.Command(*bin, "report", "--prometheus.url="+url, "--from="+start.Format(time.RFC3339), "--to="+end.Format(time.RFC3339),
			"--by="+by, "--format=csv", "--prometheus.timeout=10m")
		out, err := cmd.StdoutPipe()
		if err != nil {
			log.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		t := time.Now()
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		lines := 0
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines++
		}
		if err := cmd.Wait(); err != nil {
			log.Fatalf("--by=%s: %v", by, err)
		}
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
		fmt.Printf("| %s | %d | %s | %.1f MiB |\n", by, lines-1, time.Since(t).Round(10*time.Millisecond), float64(rss)/1024)
	}
}

// ingest streams the history to VictoriaMetrics' Prometheus text import:
// 4 GPUs per node, 70 % of the GPUs allocated to pods of 50 namespaces, with
// a utilization that follows the hour of the day.
func ingest(url string, start, end time.Time, gpus int, res time.Duration) int {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		resp, err := http.Post(url+"/api/v1/import/prometheus", "text/plain", pr)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				err = fmt.Errorf("import: %s", resp.Status)
			}
		}
		done <- err
	}()
	w := bufio.NewWriterSize(pw, 1<<20)
	n := 0
	for ts := start.Add(res); !ts.After(end); ts = ts.Add(res) {
		ms := strconv.FormatInt(ts.UnixMilli(), 10)
		hour := ts.Hour()
		for g := range gpus {
			dev := fmt.Sprintf(`job="gpuwatch",instance="node-%03d:9410",gpu="%d",uuid="GPU-%08d"`, g/4, g%4, g)
			util := float64((g*7+hour*13)%100) / 100
			allocated := g%10 < 7
			if !allocated {
				util = 0
			}
			fmt.Fprintf(w, "gpu_up{%s} 1 %s\n", dev, ms)
			fmt.Fprintf(w, "gpu_utilization_ratio{%s} %g %s\n", dev, util, ms)
			fmt.Fprintf(w, "gpu_power_usage_watts{%s} %g %s\n", dev, 60+600*util, ms)
			fmt.Fprintf(w, "gpu_memory_used_bytes{%s} %g %s\n", dev, util*80*(1<<30), ms)
			n += 4
			if allocated {
				fmt.Fprintf(w, "gpu_kubernetes_allocation_info{%s,mig_uuid=\"\",namespace=\"team-%02d\",pod=\"job-%04d\",container=\"main\"} 1 %s\n", dev, g%50, g, ms)
				n++
			}
		}
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	return n
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
