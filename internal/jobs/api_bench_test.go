//go:build !windows

package jobs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// benchRecord is an eight-GPU Slurm record with every figure present, as
// a DGX node's journal holds.
func benchRecord(i int) Record {
	f := func(v float64) *float64 { return &v }
	u := func(v uint64) *uint64 { return &v }
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	r := Record{
		ID: strconv.Itoa(100000 + i), Kind: KindSlurm, Node: "gpu-node-017",
		Slurm: &SlurmIdentity{JobID: strconv.Itoa(100000 + i), User: "user" + strconv.Itoa(i%97), Account: "project-" + strconv.Itoa(i%13), Partition: "gpu", JobName: "train-resnet50-ablation-" + strconv.Itoa(i)},
		Start: start, End: start.Add(3 * time.Hour),
	}
	for g := range 8 {
		r.GPUs = append(r.GPUs, GPU{
			Index: g, UUID: fmt.Sprintf("GPU-5c1b2a3e-%04x-4d6e-9f10-1234567890%02x", i%65536, g), Model: "NVIDIA H100 80GB HBM3",
			MemoryTotalBytes: u(85520809984), AllocatedSeconds: 10800.123456, ProcessSeconds: 10790.987654,
			IdleSeconds: f(1234.5678901), SMSeconds: f(7654.3210987), SMUtilizationMean: f(0.70873343210987), SMUtilizationMax: f(0.9987654321),
			MemoryUsedBytesMax: u(71234567890), EnergyJoules: f(7.654321098e6), XIDErrors: u(0), ThrottleSeconds: f(12.345678),
			GPM: &GPMMeans{SMActive: f(0.61234567890123), SMOccupancy: f(0.41234567890123), TensorActive: f(0.31234567890123), DRAMActive: f(0.51234567890123)},
		})
	}
	return r
}

// writeFullJournal fills dir with a full default journal (DefaultJournalFiles
// files of DefaultJournalMaxBytes) of benchRecords and returns the records'
// count.
func writeFullJournal(tb testing.TB, dir string) int {
	tb.Helper()
	i := 0
	for n := DefaultJournalFiles - 1; n >= 0; n-- {
		name := filepath.Join(dir, JournalName)
		if n > 0 {
			name += "." + strconv.Itoa(n)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
		if err != nil {
			tb.Fatal(err)
		}
		w := bufio.NewWriter(f)
		size := 0
		for {
			line, err := json.Marshal(benchRecord(i))
			if err != nil {
				tb.Fatal(err)
			}
			if size+len(line)+1 > DefaultJournalMaxBytes {
				break
			}
			_, _ = w.Write(append(line, '\n'))
			size += len(line) + 1
			i++
		}
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := f.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return i
}

// benchAPI serves the jobs API of a full default journal.
func benchAPI(b *testing.B) (srv *httptest.Server, records int) {
	b.Helper()
	dir := b.TempDir()
	records = writeFullJournal(b, dir)
	rec, err := Open(Options{Dir: dir, Node: "gpu-node-017"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rec.Close() })
	srv = httptest.NewServer(benchHandler(rec))
	b.Cleanup(srv.Close)
	return srv, records
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func peakRSS() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss << 10 // KiB on Linux
}

func get(b *testing.B, url string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Error(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("%s: %s", url, resp.Status)
	}
}

// BenchmarkJobAPIOne is the process's CPU (both sides of the loopback
// connection) per /api/v1/jobs/ID of a job in the oldest journal file.
func BenchmarkJobAPIOne(b *testing.B) {
	srv, _ := benchAPI(b)
	url := srv.URL + "/api/v1/jobs/" + strconv.Itoa(100000+42)
	get(b, url) // builds what the server keeps between requests
	cpu := cpuTime()
	for b.Loop() {
		get(b, url)
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkJobAPIParallel16 has 16 clients ask at once, in turn, for the
// job list's first page and for one job each; peak-RSS-MiB is the
// process's (run it alone: -bench with this one name, so the high-water
// mark is this benchmark's).
func BenchmarkJobAPIParallel16(b *testing.B) {
	srv, records := benchAPI(b)
	cpu := cpuTime()
	for b.Loop() {
		var wg sync.WaitGroup
		for c := range 16 {
			wg.Go(func() {
				get(b, srv.URL+"/api/v1/jobs")
				get(b, srv.URL+"/api/v1/jobs/"+strconv.Itoa(100000+(c*records)/16))
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(records), "records")
}

func benchHandler(rec *Recorder) http.Handler { return Handler(rec, APIOptions{}) }

// BenchmarkJournalIndexBuild is what the first request after a start
// pays: indexing a full default journal.
func BenchmarkJournalIndexBuild(b *testing.B) {
	dir := b.TempDir()
	writeFullJournal(b, dir)
	cpu := cpuTime()
	for b.Loop() {
		x := newJournalIndex(dir)
		x.mu.Lock()
		o, err := x.open()
		x.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		o.close()
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}
