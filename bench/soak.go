package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// soak scrapes one gpuwatch total times with scrapers concurrent
// scrapers and samples, every sampleEvery scrapes, its RSS, goroutines and
// open file descriptors. A leak shows as a curve that keeps rising after
// the first samples (warm-up: caches, connection pools, the Go heap's
// first growth).
func soak(bin, profile string, total, scrapers, sampleEvery int) error {
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

	fmt.Printf("Soak: %s, %d scrapes by %d scrapers, sampled every %d\n\n", profile, total, scrapers, sampleEvery)
	fmt.Println("| scrapes | elapsed s | RSS MiB | RssAnon MiB | Go heap in use MiB | goroutines | fds |")
	fmt.Println("|---|---|---|---|---|---|---|")
	type sample struct {
		rss, anon, heap float64
		goroutines, fd  int
	}
	var samples []sample
	take := func(done int, start time.Time) error {
		mem, err := memoryMiB(pid, "VmRSS", "RssAnon")
		if err != nil {
			return err
		}
		body, err := probe.scrape()
		if err != nil {
			return err
		}
		g := -1
		if v, ok := seriesValue(body, "go_goroutines"); ok {
			g = int(v)
		}
		// The live heap, unlike RSS, does not wait for the scavenger: a
		// leak shows here first.
		heap, _ := seriesValue(body, "go_memstats_heap_inuse_bytes")
		heap /= 1 << 20
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			return err
		}
		samples = append(samples, sample{mem[0], mem[1], heap, g, len(fds)})
		fmt.Printf("| %d | %.0f | %.1f | %.1f | %.1f | %d | %d |\n", done, time.Since(start).Seconds(), mem[0], mem[1], heap, g, len(fds))
		return nil
	}

	start := time.Now()
	if err := take(0, start); err != nil {
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
		if err := take(block, start); err != nil {
			return err
		}
	}
	if len(samples) >= 4 {
		// After warm-up (the first two blocks) the curve must be flat.
		warm, last := samples[2], samples[len(samples)-1]
		fmt.Printf("\nAfter warm-up (%d scrapes) to the end: RSS %+.1f MiB (%+.1f%%), Go heap in use %+.1f MiB, goroutines %+d, fds %+d\n",
			2*sampleEvery, last.rss-warm.rss, 100*(last.rss-warm.rss)/warm.rss, last.heap-warm.heap, last.goroutines-warm.goroutines, last.fd-warm.fd)
	}
	return nil
}

// seriesValue finds the value of an unlabelled series in a text exposition.
func seriesValue(body []byte, name string) (float64, bool) {
	for _, line := range bytes.Split(body, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte(name+" ")); ok {
			v, err := strconv.ParseFloat(string(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}
