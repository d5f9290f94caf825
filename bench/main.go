//go:build linux

// Command bench measures the gpuwatch binary end to end: it starts it on
// each simulator profile, drives /metrics on loopback with 1 and with 16
// concurrent scrapers, and prints, per run, scrape latency percentiles, CPU
// seconds per 1000 scrapes, peak RSS, series count and bytes per scrape.
//
//	make bench                      # all profiles, then the soak
//	go run ./bench -bin bin/gpuwatch -profiles dgx-h100 -scrapes 2000
//	go run ./bench -bin bin/gpuwatch -soak 100000   # the soak alone
//	go run ./bench -bin bin/gpuwatch -scrapes 300 \
//	    -peer https://github.com/utkuozdemir/nvidia_gpu_exporter.git  # side by side with the peer
//
// CPU and RSS are read from /proc for the exporter's PID only, so the
// scrapers' own cost is not counted.
//
// The binary is measured as installed: it is first copied to a temporary
// directory, as install(1), a package or a container image puts it on a
// host. About half of the RSS is the binary's own file pages, and how many
// of them a process maps depends on how they came into the page cache: the
// Go linker writes its output through a shared mapping, which on recent
// kernels leaves large folios that the executable then maps 2 MiB at a time
// (FilePmdMapped in smaps), more than the same bytes copied (bench/RESULTS.md,
// "Peak RSS: where it goes and what was done").
// -install=false measures the file given as it is.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/gpuwatch", "gpuwatch binary to measure")
	profiles := flag.String("profiles", "h100,dgx-h100,dgx-a100-mig,rtx4090,large", "comma-separated simulator profiles")
	scrapes := flag.Int("scrapes", 1000, "scrapes per run")
	concurrency := flag.String("concurrency", "1,16", "comma-separated scraper counts")
	extra := flag.String("args", "", "extra flags for gpuwatch, space-separated")
	flag.StringVar(&cpuProfileDir, "cpuprofile-dir", "", "save a 3-second CPU profile of gpuwatch from each run into this directory (go tool pprof)")
	flag.DurationVar(&warmup, "warmup", 3*time.Second, "scrape each run at least this long before measuring")
	attribution := flag.Bool("attribution", true, "also measure the attribution fleet (8 GPUs × 256 processes in 50 containers) with and without attribution")
	soakIdle := flag.Duration("soak-idle", 4*time.Minute, "after the soak's scrapes, sample the idle process this long (4 samples): the Go runtime hands freed memory back meanwhile")
	soakScrapes := flag.Int("soak", 0, "instead of the latency runs, soak one dgx-h100 with this many scrapes by 4 scrapers, sampling RSS, goroutines and fds every tenth (make bench runs 100000)")
	peer := flag.String("peer", "", "instead of the latency runs, compare with nvidia_gpu_exporter built from this git repository (URL or path) at -peer-ref, side by side in -rounds rounds")
	peerRef := flag.String("peer-ref", "e656cd8", "the peer's commit or tag to build (e656cd8 is v1.14.0-10)")
	rounds := flag.Int("rounds", 5, "rounds of the -peer comparison (each drops the page cache and measures both exporters)")
	install := flag.Bool("install", true, "copy the binary to a temporary directory and measure the copy, as it runs once installed (see the package comment)")
	flag.Parse()

	if *install {
		installed, cleanup, err := installCopy(*bin)
		if err != nil {
			fatalf("installing %s: %v", *bin, err)
		}
		defer cleanup()
		*bin = installed
	}
	if *peer != "" {
		if err := comparePeer(*bin, *peer, *peerRef, *scrapes, *rounds); err != nil {
			fatalf("comparing with the peer: %v", err)
		}
		return
	}
	if *soakScrapes > 0 {
		if err := soak(*bin, "dgx-h100", *soakScrapes, 4, max(*soakScrapes/10, 1), *soakIdle); err != nil {
			fatalf("soak: %v", err)
		}
		return
	}

	fmt.Println("| profile | scrapers | scrapes | p50 ms | p99 ms | CPU s / 1000 scrapes | peak RSS MiB | RSS at end: anon + file MiB | series | bytes/scrape |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	var runs []run
	for profile := range strings.SplitSeq(*profiles, ",") {
		if profile != "" {
			runs = append(runs, run{name: profile, args: []string{"--sim.profile=" + profile}})
		}
	}
	if *attribution {
		f, err := newFleet()
		if err != nil {
			fatalf("building the attribution fleet: %v", err)
		}
		defer f.Close()
		fleetArgs := []string{"--sim.config=" + f.simConfig, "--path.procfs=" + f.procRoot, "--docker.socket=unix://" + f.socket,
			"--slurm.jobs=false", "--cri.socket=", "--kubelet.pod-resources-socket="}
		runs = append(runs,
			run{name: "fleet-2048-procs (no attribution)", args: append(fleetArgs, "--no-attribution")},
			run{name: "fleet-2048-procs (attribution)", args: fleetArgs},
		)
	}
	for _, r := range runs {
		for c := range strings.SplitSeq(*concurrency, ",") {
			n, err := strconv.Atoi(c)
			if err != nil || n < 1 {
				fatalf("bad concurrency %q", c)
			}
			res, err := measure(*bin, r.name, append(r.args, strings.Fields(*extra)...), n, *scrapes)
			if err != nil {
				fatalf("%s with %d scrapers: %v", r.name, n, err)
			}
			fmt.Printf("| %s | %d | %d | %.2f | %.2f | %.2f | %.1f | %.1f + %.1f | %d | %d |\n",
				r.name, n, *scrapes, ms(res.p50), ms(res.p99), res.cpuPer1000, res.peakRSSMiB, res.anonMiB, res.fileMiB, res.series, res.bytes)
		}
	}
}

// cpuProfileDir, when set, receives one CPU profile per measured run.
var cpuProfileDir string

// warmup is the least time each run is scraped before it is measured.
var warmup time.Duration

// run is one gpuwatch configuration to measure.
type run struct {
	name string
	args []string // besides --backend=sim and the listen address
}

type result struct {
	p50, p99   time.Duration
	cpuPer1000 float64
	peakRSSMiB float64
	anonMiB    float64 // RssAnon when the run ends
	fileMiB    float64 // RssFile when the run ends
	series     int
	bytes      int
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

func measure(bin, name string, runArgs []string, scrapers, scrapes int) (result, error) {
	return measureCommand(name, func(addr string) *exec.Cmd {
		args := []string{"--backend=sim", "--web.listen-address=" + addr, "--log.level=warn"}
		if cpuProfileDir != "" {
			// Only then: the profiler's heap sampling costs RSS, and the
			// figures are meant to be those of gpuwatch as deployed.
			args = append(args, "--web.enable-pprof")
		}
		return exec.Command(bin, append(args, runArgs...)...)
	}, scrapers, scrapes)
}

// measureCommand starts the exporter that command(addr) describes, listening
// on addr, and measures scrapes of its /metrics by the given number of
// concurrent scrapers.
func measureCommand(name string, command func(addr string) *exec.Cmd, scrapers, scrapes int) (result, error) {
	port, err := freePort()
	if err != nil {
		return result{}, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := command(addr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	url := "http://" + addr + "/metrics"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: scrapers}}
	first := newScraper(client, url)
	var body []byte
	deadline := time.Now().Add(15 * time.Second)
	for {
		body, err = first.scrape()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("%s did not come up: %v\n%s", filepath.Base(cmd.Path), err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Warm up caches (attribution reads /proc and the runtime APIs in the
	// background), connections and the Go runtime before measuring.
	for i, warmUntil := 0, time.Now().Add(warmup); i < 50 || time.Now().Before(warmUntil); i++ {
		if _, err := first.scrape(); err != nil {
			return result{}, err
		}
	}
	body = bytes.Clone(body) // the scraper reuses its buffer

	profileDone := make(chan struct{})
	go func() {
		defer close(profileDone)
		if cpuProfileDir != "" {
			saveCPUProfile("http://"+addr, filepath.Join(cpuProfileDir, fmt.Sprintf("%d-scrapers-%s.pprof", scrapers, safeName(name))))
		}
	}()
	defer func() { <-profileDone }()
	cpuBefore, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	latencies := make([]time.Duration, scrapes)
	var next int
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range scrapers {
		wg.Go(func() {
			sc := newScraper(client, url)
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= scrapes {
					return
				}
				start := time.Now()
				_, err := sc.scrape()
				latencies[i] = time.Since(start)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return result{}, firstErr
	}
	cpuAfter, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	mem, err := memoryMiB(cmd.Process.Pid, "VmHWM", "RssAnon", "RssFile")
	if err != nil {
		return result{}, err
	}
	slices.Sort(latencies)
	return result{
		p50:        latencies[len(latencies)*50/100],
		p99:        latencies[len(latencies)*99/100],
		cpuPer1000: (cpuAfter - cpuBefore) * 1000 / float64(scrapes),
		peakRSSMiB: mem[0],
		anonMiB:    mem[1],
		fileMiB:    mem[2],
		series:     countSeries(body),
		bytes:      len(body),
	}, nil
}

// scraper fetches /metrics the way Prometheus does: it asks for gzip itself
// and decompresses into a buffer and a gzip reader that it keeps from one
// scrape to the next. (Go's transparent decompression would allocate a new
// reader and io.ReadAll a new, growing buffer per scrape: on a 2-core
// machine the harness's own garbage collection would then take CPU from
// the exporter it is measuring.)
type scraper struct {
	client *http.Client
	url    string
	buf    bytes.Buffer
	gz     *gzip.Reader
}

func newScraper(client *http.Client, url string) *scraper {
	return &scraper{client: client, url: url}
}

// scrape returns the decompressed body, valid until the next call.
func (s *scraper) scrape() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if s.gz == nil {
			s.gz, err = gzip.NewReader(resp.Body)
		} else {
			err = s.gz.Reset(resp.Body)
		}
		if err != nil {
			return nil, err
		}
		body = s.gz
	}
	s.buf.Reset()
	_, err = s.buf.ReadFrom(body)
	return s.buf.Bytes(), err
}

func countSeries(body []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Bytes(); len(line) > 0 && line[0] != '#' {
			n++
		}
	}
	return n
}

// cpuSeconds is user+system CPU time of pid, from /proc/PID/stat.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return (utime + stime) / ticksPerSecond, nil
}

// memoryMiB reads the named kB fields of /proc/PID/status (VmHWM is the
// peak resident set size) in MiB, in the order asked.
func memoryMiB(pid int, fields ...string) ([]float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	byName := make(map[string]float64)
	for line := range strings.SplitSeq(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		f := strings.Fields(value)
		if !ok || len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
		}
		byName[name] = kb / 1024
	}
	out := make([]float64, len(fields))
	for i, name := range fields {
		v, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("no %s in /proc/%d/status", name, pid)
		}
		out[i] = v
	}
	return out, nil
}

// installCopy copies bin into a new temporary directory, as install(1)
// would, and returns the copy's path and a function that removes it.
func installCopy(bin string) (string, func(), error) {
	src, err := os.Open(bin)
	if err != nil {
		return "", nil, err
	}
	defer src.Close()
	dir, err := os.MkdirTemp("", "gpuwatch-bench-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	path := filepath.Join(dir, filepath.Base(bin))
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		if closeErr := dst.Close(); err == nil {
			err = closeErr
		}
	}
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return path, cleanup, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, strings.ToLower(s))[:min(len(s), 80)]
}

// saveCPUProfile fetches a CPU profile while the scrapers run.
func saveCPUProfile(base, path string) {
	resp, err := http.Get(base + "/debug/pprof/profile?seconds=3")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
	}
}
