//go:build linux

package attribution

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The benchmark fleet: 8 GPUs × 256 processes, spread over 50 containers
// of mixed runtimes, on a generated procfs tree and a fake Docker API.
const (
	benchGPUs          = 8
	benchProcsPerGPU   = 256
	benchContainers    = 50
	benchFirstPID      = 200000
	benchScrapeEvery   = 15 * time.Second
	benchRevalidateInt = 30 * time.Second
)

// benchFleet writes the procfs tree and starts the fake Docker API.
func benchFleet(b *testing.B) (procRoot, socket string, s *snapshot.Snapshot) {
	b.Helper()
	procRoot = b.TempDir()
	ids := make([]string, benchContainers)
	containers := make(map[string]dockerInspect)
	for c := range ids {
		ids[c] = fmt.Sprintf("%064x", c+1)
		containers[ids[c]] = inspect(fmt.Sprintf("job-%d", c), "registry.example/train:v1",
			map[string]string{"com.docker.compose.project": "proj", "com.docker.compose.service": fmt.Sprintf("svc%d", c)})
	}
	fd := newFakeDocker(b, containers)

	stat, err := os.ReadFile("testdata/proc/1001/stat")
	if err != nil {
		b.Fatal(err)
	}
	status, err := os.ReadFile("testdata/proc/1001/status")
	if err != nil {
		b.Fatal(err)
	}
	s = &snapshot.Snapshot{}
	for gpu := range benchGPUs {
		for i := range benchProcsPerGPU {
			n := gpu*benchProcsPerGPU + i
			pid := benchFirstPID + n
			id := ids[n%benchContainers]
			var cgroup string
			switch n % benchContainers % 3 {
			case 0:
				cgroup = "0::/system.slice/docker-" + id + ".scope\n"
			case 1:
				cgroup = "0::/docker/" + id + "\n"
			default:
				cgroup = "0::/machine.slice/libpod-" + id + ".scope/container\n"
			}
			dir := filepath.Join(procRoot, strconv.Itoa(pid))
			files := map[string][]byte{
				"stat":    []byte(strings.Replace(string(stat), "1001 (", strconv.Itoa(pid)+" (", 1)),
				"status":  status,
				"cmdline": []byte("python3\x00train.py\x00--rank\x00" + strconv.Itoa(i) + "\x00"),
				"cgroup":  []byte(cgroup),
				"environ": []byte("PATH=/usr/bin\x00"),
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			s.Processes = append(s.Processes, snapshot.Process{GPU: gpu, PID: uint32(pid), Type: "compute"})
		}
	}
	return procRoot, "unix://" + fd.socket, s
}

// warmAttributor returns an Attributor that has read the fleet. With
// watched, every process is watched for exit through a pidfd, as on a real
// /proc (the fleet's processes being files, the pidfds are of the
// benchmark's own process, which does not exit); otherwise every process
// is checked periodically, as where pidfds cannot be used.
func warmAttributor(b *testing.B, procRoot, socket string, s *snapshot.Snapshot, watched bool) *Attributor {
	b.Helper()
	a := newFixtureAttributor(b, Options{ProcRoot: procRoot, DockerSocket: socket, Timeout: 10 * time.Second, RevalidateInterval: benchRevalidateInt})
	b.Cleanup(func() { a.Close() })
	if watched {
		w, err := newEpollWatcher(func(int) (int, error) { return unix.PidfdOpen(os.Getpid(), 0) })
		if err != nil {
			b.Fatal(err)
		}
		a.watch = w
	}
	a.Enrich(context.Background(), s)
	if watched && len(a.watch.watched) != len(s.Processes) {
		b.Fatalf("%d of %d processes watched", len(a.watch.watched), len(s.Processes))
	}
	for i, p := range s.Processes {
		if p.Owner.Container.Name == "" || p.Owner.User != "alice" {
			b.Fatalf("cold Enrich left process %d unattributed: %+v", i, p.Owner)
		}
	}
	return a
}

// reportPercentiles adds p50 and p99 of the per-Enrich times.
func reportPercentiles(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkEnrichWarm is a scrape with every cache warm and no PID-reuse
// check due: the cost Enrich adds to almost every scrape where processes
// are checked periodically.
func BenchmarkEnrichWarm(b *testing.B) { benchmarkEnrichWarm(b, false) }

// BenchmarkEnrichWarmWatched is BenchmarkEnrichWarm with every process
// watched for exit through a pidfd: the cost on a real /proc.
func BenchmarkEnrichWarmWatched(b *testing.B) { benchmarkEnrichWarm(b, true) }

func benchmarkEnrichWarm(b *testing.B, watched bool) {
	procRoot, socket, s := benchFleet(b)
	a := warmAttributor(b, procRoot, socket, s, watched)
	ctx := context.Background()
	times := make([]time.Duration, 0, 1<<16) // not to count its growth in B/op
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		a.Enrich(ctx, s)
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, times)
	if s.Processes[len(s.Processes)-1].Owner.Container.Name == "" {
		b.Fatal("warm Enrich lost attribution")
	}
}

// BenchmarkEnrichWarmReordered is BenchmarkEnrichWarm with the processes
// listed in a different order each scrape (alternately forwards and
// backwards), so that no process is found at its previous position and
// every one is looked up by PID.
func BenchmarkEnrichWarmReordered(b *testing.B) {
	procRoot, socket, s := benchFleet(b)
	a := warmAttributor(b, procRoot, socket, s, false)
	reversed := &snapshot.Snapshot{Processes: slices.Clone(s.Processes)}
	slices.Reverse(reversed.Processes)
	snaps := [2]*snapshot.Snapshot{reversed, s}
	ctx := context.Background()
	times := make([]time.Duration, 0, 1<<16) // not to count its growth in B/op
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		a.Enrich(ctx, snaps[i%2])
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, times)
	if reversed.Processes[0].Owner.Container.Name == "" {
		b.Fatal("warm Enrich lost attribution")
	}
}

// BenchmarkEnrichSteadyState advances a fake clock by a scrape interval per
// Enrich, so that each one starts the PID-reuse checks that fell due
// (about half of the processes with a 30s interval and 15s scrapes) and
// merges the previous ones. The checks themselves run between scrapes and
// are waited for outside the timer; their CPU cost is reported per scrape
// as check-ns.
func BenchmarkEnrichSteadyState(b *testing.B) { benchmarkEnrichSteadyState(b, false) }

// BenchmarkEnrichSteadyStateWatched is BenchmarkEnrichSteadyState with
// every process watched for exit through a pidfd, as on a real /proc: no
// check is ever due.
func BenchmarkEnrichSteadyStateWatched(b *testing.B) { benchmarkEnrichSteadyState(b, true) }

func benchmarkEnrichSteadyState(b *testing.B, watched bool) {
	procRoot, socket, s := benchFleet(b)
	a := warmAttributor(b, procRoot, socket, s, watched)
	clock := newFakeClock()
	a.now = clock.Now
	a.Enrich(context.Background(), s) // entries now scheduled on the fake clock
	ctx := context.Background()
	times := make([]time.Duration, 0, 1<<16) // not to count its growth in B/op
	var checking time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clock.Advance(benchScrapeEvery)
		start := time.Now()
		a.Enrich(ctx, s)
		times = append(times, time.Since(start))

		b.StopTimer()
		if job := a.revalidation; job != nil {
			<-job.done
			checking += time.Since(start)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, times)
	b.ReportMetric(float64(checking.Nanoseconds())/float64(b.N), "check-ns")
}
