//go:build cgo

package accounting

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/selfstats"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The cost of accounting on a busy large node: a DGX H100 (GPU 7 in MIG
// mode) with 256 processes per GPU in 50 containers, each process busy,
// so every read carries a sample of every process (one per process per
// read, the simulator's default driver).
const (
	benchGPUs        = 8
	benchProcsPerGPU = 256
	benchContainers  = 50
)

func benchConfig() sim.Config {
	cfg := sim.Config{Profile: "dgx-h100"}
	for gpu := range benchGPUs {
		for i := range benchProcsPerGPU {
			p := sim.ProcessSpec{GPU: gpu, PID: uint32(200000 + gpu*benchProcsPerGPU + i), UsedMemoryBytes: 256 << 20, SMUtilization: 0.003}
			if gpu == 7 {
				p.GPUInstance = new([8]int{1, 1, 1, 1, 5, 5, 13, 14}[i%8])
			}
			cfg.Processes = append(cfg.Processes, p)
		}
	}
	return cfg
}

// benchOwners gives the fleet's processes owners, as warm attribution
// would: 50 containers of 5 users.
func benchOwners(s *snapshot.Snapshot) {
	for i := range s.Processes {
		n := int(s.Processes[i].PID) % benchContainers
		s.Processes[i].Owner = snapshot.Owner{
			User:      fmt.Sprintf("user%d", n%5),
			Container: snapshot.Container{Name: fmt.Sprintf("train-%02d", n)},
		}
	}
}

// benchSim is the 2048-process fleet, or with typical the dgx-h100
// profile's own ten processes (a training job, a fine-tuning job, an
// inference server, a notebook, a MIG instance).
func benchSim(b *testing.B, typical bool) *sim.Sim {
	cfg := benchConfig()
	if typical {
		cfg = sim.Config{Profile: "dgx-h100"}
	}
	return benchSimOf(b, cfg)
}

func benchSimOf(b *testing.B, cfg sim.Config) *sim.Sim {
	zero := sim.Duration(0)
	cfg.PinTime = &zero
	s, err := sim.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func benchReader(b *testing.B, s *sim.Sim, opts nvmlbackend.Options) *nvmlbackend.Reader {
	opts.Now, opts.Library = s.Now, "simulator"
	r, err := nvmlbackend.New(s, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	return r
}

// benchAccountingReader is benchReader for the accounting's reader.
func benchAccountingReader(b *testing.B, s *sim.Sim, opts nvmlbackend.AccountingOptions) *nvmlbackend.Reader {
	opts.Now, opts.Library = s.Now, "simulator"
	r, err := nvmlbackend.NewAccountingReader(s, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	return r
}

// BenchmarkTick is one whole accounting tick: the accounting's reader
// (processes, samples, energy, MIG and GPM) and the integration; owners
// are set as warm attribution sets them. The simulated clock moves 2 s
// per tick.
func BenchmarkTick(b *testing.B) {
	for _, typical := range []bool{false, true} {
		b.Run(fleetName(typical), func(b *testing.B) { benchmarkTick(b, typical) })
	}
}

func fleetName(typical bool) string {
	if typical {
		return "dgx-h100"
	}
	return "fleet-2048-procs"
}

// BenchmarkTickEveryBufferedSample is BenchmarkTick's fleet against a
// driver that gives every buffered 1/6 s sample (the simulator's
// process_samples: every_period), twelve per busy process per tick: what
// a tick would cost if a real driver answered so.
func BenchmarkTickEveryBufferedSample(b *testing.B) {
	cfg := benchConfig()
	cfg.ProcessSamples = sim.ProcessSamplesEveryPeriod
	benchmarkTickOn(b, benchSimOf(b, cfg))
}

func benchmarkTick(b *testing.B, typical bool) {
	benchmarkTickOn(b, benchSim(b, typical))
}

func benchmarkTickOn(b *testing.B, s *sim.Sim) {
	a, tick := newBenchTicker(b, s)
	loopCPU(b, func() { tick() })
	b.ReportMetric(float64(len(a.Totals().Owners)), "owners")
}

// newBenchTicker is the accounting's reader and an accountant on s, and a
// tick that moves the simulated clock one interval, reads, sets the owners
// and integrates, returning the snapshot; it ticks once (the first list).
func newBenchTicker(b *testing.B, s *sim.Sim) (*Accountant, func() *snapshot.Snapshot) {
	r := benchAccountingReader(b, s, nvmlbackend.AccountingOptions{Options: nvmlbackend.Options{Groups: ReaderGroups()}, GPMOnlyMIG: true,
		ListProcessesEvery: ListProcessesEvery(DefaultInterval), ListProcessesSteadyEvery: ListProcessesSteadyEvery(DefaultInterval)})
	a, _ := New(Options{})
	ctx := context.Background()
	elapsed := time.Duration(0)
	tick := func() *snapshot.Snapshot {
		elapsed += DefaultInterval
		s.SetElapsed(elapsed)
		snap, err := r.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		benchOwners(snap)
		a.Observe(snap)
		return snap
	}
	tick()
	return a, tick
}

// BenchmarkTickCold is BenchmarkTick as a serving process ticks: every
// two seconds, its caches long since filled by other work. Before each
// tick it sweeps a buffer larger than the machine's last-level cache and
// sleeps, so that the tick finds its code and data in memory, not in
// cache: a warm loop of ticks (BenchmarkTick) costs a third of what a
// tick costs a serving process, and this benchmark reproduces the latter
// (bench/RESULTS.md). It reports the median CPU of the ticks that list
// no process (most ticks) and of those that list a GPU's processes.
func BenchmarkTickCold(b *testing.B) {
	for _, typical := range []bool{false, true} {
		b.Run(fleetName(typical), func(b *testing.B) {
			_, tick := newBenchTicker(b, benchSim(b, typical))
			var plain, listing []time.Duration
			coldLoop(b, func() {
				start := processCPU()
				snap := tick()
				cpu := processCPU() - start
				if listedAny(snap) {
					listing = append(listing, cpu)
				} else {
					plain = append(plain, cpu)
				}
			})
			b.ReportMetric(float64(median(plain)), "plain-tick-cpu-ns")
			b.ReportMetric(float64(median(listing)), "list-tick-cpu-ns")
		})
	}
}

// BenchmarkTickFloorCold is the least a tick between lists could do, cold
// as in BenchmarkTickCold: per GPU, the driver's per-process samples and
// energy counter, and each sample summed into its PID's total in a map;
// nothing else (no MIG, GPM, owners, allocations or checks). Beside
// BenchmarkTickCold's plain ticks it says how much of a tick is the
// reader's, the attribution's and the accountant's own code rather than
// the work: on the 2048-process fleet the floor costs about what the whole
// tick does (the samples are the cost), on the ten-process dgx-h100 a
// tenth of it (bench/RESULTS.md, "Afternoon of 2026-11-29").
func BenchmarkTickFloorCold(b *testing.B) {
	for _, typical := range []bool{false, true} {
		b.Run(fleetName(typical), func(b *testing.B) {
			s := benchSim(b, typical)
			if ret := s.Init(); ret != nvml.SUCCESS {
				b.Fatal(ret)
			}
			n, _ := s.DeviceGetCount()
			devices := make([]nvml.Device, n)
			for i := range devices {
				devices[i], _ = s.DeviceGetHandleByIndex(i)
			}
			lastSeen := make([]uint64, n)
			smByPID := map[uint32]float64{}
			var energy uint64
			elapsed := time.Duration(0)
			var ticks []time.Duration
			coldLoop(b, func() {
				elapsed += DefaultInterval
				s.SetElapsed(elapsed)
				start := processCPU()
				for i, d := range devices {
					if e, ret := d.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
						energy += e
					}
					samples, ret := d.GetProcessUtilization(lastSeen[i])
					if ret != nvml.SUCCESS {
						continue
					}
					for _, sample := range samples {
						smByPID[sample.Pid] += float64(sample.SmUtil) * DefaultInterval.Seconds()
						lastSeen[i] = max(lastSeen[i], sample.TimeStamp)
					}
				}
				ticks = append(ticks, processCPU()-start)
			})
			if len(smByPID) == 0 || energy == 0 {
				b.Fatalf("the floor read nothing: %d PIDs, energy %d", len(smByPID), energy)
			}
			b.ReportMetric(float64(median(ticks)), "tick-cpu-ns")
		})
	}
}

// coldLoop runs op in b.Loop, each time after evicting the caches and
// sleeping, as a serving process's tick finds them.
func coldLoop(b *testing.B, op func()) {
	evict := make([]byte, 64<<20)
	for b.Loop() {
		for i := 0; i < len(evict); i += 64 {
			evict[i]++
		}
		time.Sleep(5 * time.Millisecond)
		op()
	}
}

func listedAny(s *snapshot.Snapshot) bool {
	for i := range s.Devices {
		if !s.Devices[i].ProcessesNotListed {
			return true
		}
	}
	return false
}

// median is the middle of ds (sorted in place); 0 when empty.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkObserve is the integration alone, on snapshots read before:
// listed, a tick whose snapshot lists every process (attributed); between
// lists, one that carries only the samples and the energy counter (the
// reader lists processes every ListInterval, or when the samples change).
func BenchmarkObserve(b *testing.B) {
	b.Run("listed", func(b *testing.B) { benchmarkObserve(b, 1) })
	b.Run("between-lists", func(b *testing.B) { benchmarkObserve(b, ListProcessesEvery(DefaultInterval)) })
}

func benchmarkObserve(b *testing.B, listEvery int) {
	s := benchSim(b, false)
	r := benchAccountingReader(b, s, nvmlbackend.AccountingOptions{Options: nvmlbackend.Options{Groups: ReaderGroups()}, GPMOnlyMIG: true, ListProcessesEvery: listEvery})
	var snaps []*snapshot.Snapshot
	for i := range 2 {
		s.SetElapsed(time.Duration(i+1) * DefaultInterval)
		snap, err := r.Read(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		benchOwners(snap)
		snaps = append(snaps, snap)
	}
	if listed := !snaps[1].Devices[0].ProcessesNotListed; listed != (listEvery == 1) {
		b.Fatalf("second read listed: %v", listed)
	}
	a, _ := New(Options{})
	a.Observe(snaps[0])
	i := 0
	loopCPU(b, func() {
		// The second snapshot again and again, each one tick later.
		snap := *snaps[1]
		i++
		snap.Time = snaps[0].Time.Add(time.Duration(i) * DefaultInterval)
		a.Observe(&snap)
	})
}

// BenchmarkScrape is today's scrape of the same fleet, for comparison:
// a full read (every group), owners set, and the /metrics text.
func BenchmarkScrape(b *testing.B) {
	for _, typical := range []bool{false, true} {
		b.Run(fleetName(typical), func(b *testing.B) { benchmarkScrape(b, typical) })
	}
}

func benchmarkScrape(b *testing.B, typical bool) {
	s := benchSim(b, typical)
	r := benchReader(b, s, nvmlbackend.Options{Groups: nvmlbackend.AllGroups()})
	elapsed := time.Duration(0)
	src := exporter.SourceFunc(func(ctx context.Context) (*snapshot.Snapshot, error) {
		elapsed += 15 * time.Second
		s.SetElapsed(elapsed)
		snap, err := r.Read(ctx)
		if err == nil {
			benchOwners(snap)
		}
		return snap, err
	})
	e, err := exporter.New(src, exporter.Options{})
	if err != nil {
		b.Fatal(err)
	}
	h := e.TextHandler(nil)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	loopCPU(b, func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	})
}

// TestMemoryBoundedByOwners: the totals hold one entry per owner per GPU
// however long it runs; many ticks of the same owners do not grow the
// heap.
func TestMemoryBoundedByOwners(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the heap; skipped with -short")
	}
	a, _ := New(Options{})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := func(i int) *snapshot.Snapshot {
		s := &snapshot.Snapshot{Time: start.Add(time.Duration(i) * time.Second)}
		for g := range 8 {
			d := snapshot.Device{Index: g, UUID: fmt.Sprintf("GPU-%d", g), Up: true, Power: snapshot.Power{Energy: snapshot.Some(float64(i) * 300)}}
			for p := range 256 {
				pid := uint32(g*256 + p)
				d.ProcessSamples = append(d.ProcessSamples, snapshot.ProcessSample{PID: pid, TimeMicros: uint64(s.Time.UnixMicro()), SM: 0.003})
				s.Processes = append(s.Processes, snapshot.Process{GPU: g, GPUUUID: d.UUID, PID: pid,
					UsedMemory: snapshot.Some[uint64](1 << 28), Owner: snapshot.Owner{User: fmt.Sprintf("u%d", p%50)}})
			}
			s.Devices = append(s.Devices, d)
		}
		return s
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for i := range 20 {
		a.Observe(snap(i))
	}
	before := heap()
	for i := 20; i < 200; i++ {
		a.Observe(snap(i))
	}
	after := heap()
	if n := len(a.Totals().Owners); n != 8*50 {
		t.Fatalf("%d owner totals, want 400 (50 owners on each of 8 GPUs)", n)
	}
	// A few KiB of noise from the runtime; a leak per tick would be
	// hundreds of KiB over 180 ticks of 2048 processes.
	if after > before+256<<10 {
		t.Errorf("heap grew from %d to %d bytes over 180 ticks of the same owners", before, after)
	}
}

// processCPU is this process's user and system CPU time so far. The
// machines that run benchmarks are shared: CPU time per operation is
// steadier than wall time, and it counts the reader's goroutines and the
// garbage collector too.
func processCPU() time.Duration {
	cpu, _ := selfstats.CPUTime() // getrusage of the process itself does not fail on Linux
	return cpu
}

// loopCPU runs op in b.Loop and reports its CPU time per operation.
func loopCPU(b *testing.B, op func()) {
	b.ReportAllocs()
	n := 0
	start := processCPU()
	for b.Loop() {
		op()
		n++
	}
	b.ReportMetric(float64(processCPU()-start)/float64(max(n, 1)), "cpu-ns/op")
}
