//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// soak scrapes one gpuwatch total times with scrapers concurrent
// scrapers and samples, every sampleEvery scrapes, its RSS, goroutines and
// open file descriptors, then samples it idle for idle. A leak shows as a curve that keeps rising after
// the first samples (warm-up: caches, connection pools, the Go heap's
// first growth).
func soak(bin, profile string, total, scrapers, sampleEvery int, idle time.Duration) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--backend=sim", "--sim.profile="+profile, "--web.listen-address="+addr, "--log.level=warn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid

	url := "http://" + addr + "/metrics"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: scrapers}}
	probe := newScraper(client, url)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := probe.scrape(); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("gpuwatch did not come up: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	fmt.Printf("Soak: %s, %d scrapes by %d scrapers, sampled every %d, then %s idle\n\n", profile, total, scrapers, sampleEvery, idle)
	fmt.Println("| scrapes | elapsed s | RSS MiB | RssAnon MiB | Go heap in use MiB | Go heap held MiB | Go runtime other MiB | threads | goroutines | fds |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	var samples []soakSample
	take := func(label string, start time.Time) error {
		smp, err := takeSoakSample(pid, probe)
		if err != nil {
			return err
		}
		samples = append(samples, smp)
		fmt.Printf("| %s | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %d | %d |\n", label, time.Since(start).Seconds(),
			smp.rss, smp.anon, smp.heapInuse, smp.heapHeld, smp.runtimeOther, smp.threads, smp.goroutines, smp.fds)
		return nil
	}

	start := time.Now()
	if err := take("0", start); err != nil {
		return err
	}
	var next atomic.Int64
	for block := sampleEvery; block <= total; block += sampleEvery {
		var wg sync.WaitGroup
		var firstErr atomic.Value
		for range scrapers {
			wg.Go(func() {
				sc := newScraper(client, url)
				for next.Add(1) <= int64(block) {
					if _, err := sc.scrape(); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return err
		}
		next.Store(int64(block))
		if err := take(strconv.Itoa(block), start); err != nil {
			return err
		}
	}
	// Then no scrapes at all: what the runtime still holds is handed back
	// to the kernel by its background scavenger over the next minutes,
	// which tells retained-but-free memory from memory in use.
	if idle > 0 {
		const idleSamples = 4
		for k := 1; k <= idleSamples; k++ {
			time.Sleep(idle / idleSamples)
			if err := take(fmt.Sprintf("idle +%s", idle*time.Duration(k)/idleSamples), start); err != nil {
				return err
			}
		}
	}
	scraped := samples[:total/sampleEvery+1]
	if len(scraped) >= 4 {
		// After warm-up (the first two blocks) the curve must be flat.
		warm, last := scraped[2], scraped[len(scraped)-1]
		fmt.Printf("\nAfter warm-up (%d scrapes) to the last scrape: RSS %+.1f MiB (%+.1f%%), Go heap in use %+.1f MiB, Go heap held %+.1f MiB, threads %+d, goroutines %+d, fds %+d\n",
			2*sampleEvery, last.rss-warm.rss, 100*(last.rss-warm.rss)/warm.rss, last.heapInuse-warm.heapInuse,
			last.heapHeld-warm.heapHeld, last.threads-warm.threads, last.goroutines-warm.goroutines, last.fds-warm.fds)
		if len(samples) > len(scraped) {
			end := samples[len(samples)-1]
			fmt.Printf("After %s idle: RSS %+.1f MiB against the warm-up sample (%+.1f%%)\n", idle, end.rss-warm.rss, 100*(end.rss-warm.rss)/warm.rss)
		}
	}
	return nil
}

// soakSample is one sample of the soaked process. heapHeld is what the Go
// heap holds from the kernel (heap_sys - heap_released: in use, plus free
// spans not yet scavenged); runtimeOther is the runtime's memory outside
// the heap (stacks, GC metadata, spans, buffers). RSS beyond both is the
// binary's text and data and C allocations.
type soakSample struct {
	rss, anon, heapInuse, heapHeld, runtimeOther float64
	threads, goroutines, fds                     int
}

func takeSoakSample(pid int, probe *scraper) (soakSample, error) {
	var smp soakSample
	mem, err := memoryMiB(pid, "VmRSS", "RssAnon")
	if err != nil {
		return smp, err
	}
	smp.rss, smp.anon = mem[0], mem[1]
	threads, err := statusCount(pid, "Threads")
	if err != nil {
		return smp, err
	}
	smp.threads = threads
	body, err := probe.scrape()
	if err != nil {
		return smp, err
	}
	smp.goroutines = -1
	if v, ok := seriesValue(body, "go_goroutines"); ok {
		smp.goroutines = int(v)
	}
	// The live heap, unlike RSS, does not wait for the scavenger: a
	// leak shows here first.
	metric := func(name string) float64 { v, _ := seriesValue(body, name); return v / (1 << 20) }
	smp.heapInuse = metric("go_memstats_heap_inuse_bytes")
	smp.heapHeld = metric("go_memstats_heap_sys_bytes") - metric("go_memstats_heap_released_bytes")
	smp.runtimeOther = metric("go_memstats_sys_bytes") - metric("go_memstats_heap_sys_bytes")
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return smp, err
	}
	smp.fds = len(fds)
	return smp, nil
}

// statusCount reads a count field (such as Threads) of /proc/PID/status.
func statusCount(pid int, field string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if value, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.Atoi(strings.TrimSpace(value))
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// seriesValue finds the value of an unlabelled series in a text exposition.
func seriesValue(body []byte, name string) (float64, bool) {
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte(name+" ")); ok {
			v, err := strconv.ParseFloat(string(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}
