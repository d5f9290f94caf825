package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// scriptedRunner answers from a function and counts calls.
type scriptedRunner struct {
	calls atomic.Int64
	fn    func(args []string) ([]byte, error)
}

func (s *scriptedRunner) Run(_ context.Context, path string, args ...string) ([]byte, error) {
	s.calls.Add(1)
	return s.fn(append([]string{filepath.Base(path)}, args...))
}

func TestJobLookup(t *testing.T) {
	fixture := readFixture(t, "22.05", "scontrol_show_job_2.txt")
	r := &scriptedRunner{fn: func(args []string) ([]byte, error) {
		switch strings.Join(args, " ") {
		case "scontrol show job -d -o 2":
			time.Sleep(20 * time.Millisecond) // let concurrent lookups pile up
			return fixture, nil
		case "scontrol show job -d -o 9":
			return nil, &CommandError{Command: "scontrol", Err: errors.New("exit status 1"), Stderr: "slurm_load_jobs error: Invalid job id specified"}
		}
		return nil, fmt.Errorf("unexpected %v", args)
	}}
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	l, err := NewJobLookup(JobLookupOptions{Runner: r, TTL: time.Minute, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot.SlurmJob{JobID: "2", User: "root", Account: "physics", Partition: "gpu", JobName: "train"}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			got, err := l.Lookup(context.Background(), "2")
			if err != nil || got != want {
				t.Errorf("Lookup(2) = %+v, %v", got, err)
			}
		})
	}
	wg.Wait()
	if n := r.calls.Load(); n != 1 {
		t.Errorf("10 concurrent lookups ran scontrol %d times, want 1", n)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if _, err := l.Lookup(context.Background(), "2"); err != nil || r.calls.Load() != 2 {
		t.Errorf("after the TTL: %v, %d calls", err, r.calls.Load())
	}

	if _, err := l.Lookup(context.Background(), "9"); !errors.Is(err, ErrJobNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := l.Lookup(context.Background(), "9"); !errors.Is(err, ErrJobNotFound) || r.calls.Load() != 3 {
		t.Errorf("unknown job is not cached: %v, %d calls", err, r.calls.Load())
	}
	for _, bad := range []string{"", "-1", "1;id", "--help", "12 13", "1_x"} {
		if _, err := l.Lookup(context.Background(), bad); err == nil {
			t.Errorf("Lookup(%q): no error", bad)
		}
	}
}

func TestValidJobID(t *testing.T) {
	for id, ok := range map[string]bool{"42": true, "42_7": true, "42+1": true, "": false, "4a": false, "_1": false, "1_": false, "-5": false} {
		if ValidJobID(id) != ok {
			t.Errorf("ValidJobID(%q) = %v", id, !ok)
		}
	}
}

// Allocations lists the GPU indexes each running job holds on the node,
// from squeue's job list and scontrol's per-job GRES detail.
func TestJobLookupAllocations(t *testing.T) {
	multi := "JobId=101 JobName=llm UserId=alice(1000) Account=physics JobState=RUNNING Reason=None Partition=gpu " +
		"NodeList=gpu-[01-02] NumNodes=2 NumCPUs=64 TRES=cpu=64,node=2 " +
		"Nodes=gpu-01 CPU_IDs=0-31 Mem=0 GRES=gpu:a100:2(IDX:1-2) Nodes=gpu-02 CPU_IDs=0-31 Mem=0 GRES=gpu:a100:4(IDX:0-3)\n"
	single := "JobId=102 JobName=md UserId=bob(1001) Account=chem JobState=RUNNING Reason=None Partition=gpu " +
		"NodeList=gpu-01 NumNodes=1 NumCPUs=8 TRES=cpu=8,node=1 Nodes=gpu-01 CPU_IDs=32-39 Mem=0 GRES=gpu:a100:1(IDX:0)\n"
	r := &scriptedRunner{fn: func(args []string) ([]byte, error) {
		switch strings.Join(args, " ") {
		case "squeue -h -w gpu-01 -t RUNNING -o %i":
			return []byte("101\n102\n103\n"), nil
		case "scontrol show job -d -o 101":
			return []byte(multi), nil
		case "scontrol show job -d -o 102":
			return []byte(single), nil
		case "scontrol show job -d -o 103": // ended between the two calls
			return nil, &CommandError{Command: "scontrol", Err: errors.New("exit status 1"), Stderr: "slurm_load_jobs error: Invalid job id specified"}
		}
		return nil, fmt.Errorf("unexpected %v", args)
	}}
	l, err := NewJobLookup(JobLookupOptions{Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Allocations(context.Background(), "gpu-01")
	if err != nil {
		t.Fatal(err)
	}
	alice := snapshot.SlurmJob{JobID: "101", User: "alice", Account: "physics", Partition: "gpu", JobName: "llm"}
	bob := snapshot.SlurmJob{JobID: "102", User: "bob", Account: "chem", Partition: "gpu", JobName: "md"}
	want := []GPUAllocation{
		{Node: "gpu-01", GPU: 0, Type: "a100", Job: bob},
		{Node: "gpu-01", GPU: 1, Type: "a100", Job: alice},
		{Node: "gpu-01", GPU: 2, Type: "a100", Job: alice},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Allocations:\n got %+v\nwant %+v", got, want)
	}
	devices := []snapshot.Device{{Index: 0, UUID: "GPU-aaa"}, {Index: 1, UUID: "GPU-bbb"}}
	snap := ToSnapshotAllocations(got, devices)
	if snap[0].GPUUUID != "GPU-aaa" || snap[1].GPUUUID != "GPU-bbb" || snap[2].GPUUUID != "" || snap[1].Slurm != alice || snap[0].GPU != 0 {
		t.Errorf("ToSnapshotAllocations: %+v", snap)
	}
	if _, err := l.Allocations(context.Background(), "-w"); err == nil {
		t.Error("node name starting with '-': no error")
	}
}

// lookupOnAClock is a JobLookup running r, on a clock that moves only by
// advance: squeue's list is fresh for 10 s, a job's answer for a minute.
func lookupOnAClock(t *testing.T, r CommandRunner) (l *JobLookup, advance func(time.Duration)) {
	t.Helper()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l, err := NewJobLookup(JobLookupOptions{Runner: r, Now: clock, ListInterval: 10 * time.Second, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return l, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}

// CachedAllocations answers as Allocations does while squeue's list and
// every job's scontrol answer are fresh, running no command; it does not
// answer before the first Allocations, nor once either cache is stale.
func TestJobLookupCachedAllocations(t *testing.T) {
	job := "JobId=102 JobName=md UserId=bob(1001) Account=chem JobState=RUNNING Reason=None Partition=gpu " +
		"NodeList=gpu-01 NumNodes=1 NumCPUs=8 TRES=cpu=8,node=1 Nodes=gpu-01 CPU_IDs=32-39 Mem=0 GRES=gpu:a100:1(IDX:0)\n"
	var jobs atomic.Value
	jobs.Store("102\n")
	r := &scriptedRunner{fn: func(args []string) ([]byte, error) {
		switch strings.Join(args, " ") {
		case "squeue -h -w gpu-01 -t RUNNING -o %i":
			return []byte(jobs.Load().(string)), nil
		case "scontrol show job -d -o 102", "scontrol show job -d -o 103":
			return []byte(strings.ReplaceAll(job, "102", args[len(args)-1])), nil
		}
		return nil, fmt.Errorf("unexpected %v", args)
	}}
	l, advance := lookupOnAClock(t, r)
	if _, _, ok := l.CachedAllocations("gpu-01"); ok {
		t.Fatal("answered before anything was cached")
	}
	want, err := l.Allocations(context.Background(), "gpu-01")
	if err != nil {
		t.Fatal(err)
	}
	calls := r.calls.Load()
	got, _, ok := l.CachedAllocations("gpu-01")
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("CachedAllocations = %+v, %v; want %+v as Allocations", got, ok, want)
	}
	if r.calls.Load() != calls {
		t.Error("CachedAllocations ran a command")
	}
	// squeue's list goes stale first: no answer until it is asked again.
	advance(11 * time.Second)
	if _, _, ok := l.CachedAllocations("gpu-01"); ok {
		t.Error("answered from a stale job list")
	}
	// A job not cached yet: no answer until Allocations looked it up.
	jobs.Store("102\n103\n")
	if _, err := l.Allocations(context.Background(), "gpu-01"); err != nil {
		t.Fatal(err)
	}
	if got, _, ok := l.CachedAllocations("gpu-01"); !ok || len(got) != 2 {
		t.Errorf("after 103 was looked up: %+v, %v; want both jobs", got, ok)
	}
	advance(9 * time.Second)
	jobs.Store("102\n104\n")
	advance(2 * time.Second)
	if _, err := l.Allocations(context.Background(), "gpu-01"); err == nil {
		t.Fatal("scontrol for 104 is not scripted: want its error")
	}
	if _, _, ok := l.CachedAllocations("gpu-01"); ok {
		t.Error("answered although job 104's lookup failed (Allocations reports that error)")
	}
	if _, _, ok := l.CachedAllocations("-w"); ok {
		t.Error("answered for a node name starting with '-'")
	}
}

// NodeAllocations.ListCached answers as List does, keeps its answer while
// the lookup's caches and the GPUs stand (the same slice again), and builds
// it anew when either changes.
func TestNodeAllocationsListCached(t *testing.T) {
	job := func(id, idx string) string {
		return "JobId=" + id + " JobName=md UserId=bob(1001) Account=chem JobState=RUNNING Reason=None Partition=gpu " +
			"NodeList=gpu-01 NumNodes=1 NumCPUs=8 TRES=cpu=8,node=1 Nodes=gpu-01 CPU_IDs=32-39 Mem=0 GRES=gpu:a100:1(IDX:" + idx + ")\n"
	}
	var running atomic.Value
	running.Store("102\n")
	r := &scriptedRunner{fn: func(args []string) ([]byte, error) {
		switch strings.Join(args, " ") {
		case "squeue -h -w gpu-01 -t RUNNING -o %i":
			return []byte(running.Load().(string)), nil
		case "scontrol show job -d -o 102":
			return []byte(job("102", "0")), nil
		case "scontrol show job -d -o 103":
			return []byte(job("103", "1")), nil
		}
		return nil, fmt.Errorf("unexpected %v", args)
	}}
	l, advance := lookupOnAClock(t, r)
	n := &NodeAllocations{Lookup: l, Node: "gpu-01"}
	devices := []snapshot.Device{{Index: 0, UUID: "GPU-aaa"}, {Index: 1, UUID: "GPU-bbb"}}
	if _, ok := n.ListCached(devices); ok {
		t.Fatal("answered before anything was cached")
	}
	want, err := n.List(context.Background(), devices)
	if err != nil {
		t.Fatal(err)
	}
	first, ok := n.ListCached(devices)
	if !ok || !reflect.DeepEqual(first, want) {
		t.Fatalf("ListCached = %+v, %v; want %+v", first, ok, want)
	}
	if again, _ := n.ListCached(devices); len(again) == 0 || &again[0] != &first[0] {
		t.Error("the same caches and GPUs: the answer was built again")
	}
	// Other GPUs: matched anew.
	other := []snapshot.Device{{Index: 0, UUID: "GPU-ccc"}}
	if got, ok := n.ListCached(other); !ok || len(got) != 1 || got[0].GPUUUID != "GPU-ccc" {
		t.Errorf("other GPUs: ListCached = %+v, %v", got, ok)
	}
	if got, _ := n.ListCached(devices); !reflect.DeepEqual(got, want) {
		t.Errorf("back on the first GPUs: %+v, want %+v", got, want)
	}
	// A job starts: squeue's next list names it, and the answer follows.
	running.Store("102\n103\n")
	advance(11 * time.Second)
	if _, ok := n.ListCached(devices); ok {
		t.Error("answered from a stale job list")
	}
	if _, err := n.List(context.Background(), devices); err != nil {
		t.Fatal(err)
	}
	if got, ok := n.ListCached(devices); !ok || len(got) != 2 || got[1].Slurm.JobID != "103" || got[1].GPUUUID != "GPU-bbb" {
		t.Errorf("after job 103 started: ListCached = %+v, %v; want jobs 102 and 103", got, ok)
	}
	// The kept answer stands until the first of its parts expires: here
	// job 102's answer (fetched at 0 s, a minute's TTL) before squeue's
	// list (fetched at 55 s, for 10 s).
	advance(44 * time.Second) // 55 s
	if _, err := n.List(context.Background(), devices); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.ListCached(devices); !ok {
		t.Fatal("at 55 s: no answer")
	}
	advance(4 * time.Second) // 59 s
	if _, ok := n.ListCached(devices); !ok {
		t.Error("at 59 s: no answer, though every part is fresh")
	}
	advance(2 * time.Second) // 61 s
	if got, ok := n.ListCached(devices); ok {
		t.Errorf("at 61 s, job 102's answer expired: ListCached = %+v, want no answer", got)
	}
}

func TestReadJobEnv(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := "PATH=/usr/bin\x00SLURM_JOB_ID=77\x00SLURM_JOB_USER=alice\x00SLURM_JOB_ACCOUNT=physics\x00" +
		"SLURM_JOB_PARTITION=gpu\x00SLURM_JOB_GPUS=0,1\x00CUDA_VISIBLE_DEVICES=0,1\x00SLURM_JOB_NAME=train\x00SLURM_STEP_ID=0\x00"
	if err := os.WriteFile(filepath.Join(root, "4242", "environ"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJobEnv(root, 4242)
	if err != nil {
		t.Fatal(err)
	}
	want := JobEnv{JobID: "77", StepID: "0", User: "alice", Account: "physics", Partition: "gpu", JobName: "train", JobGPUs: "0,1", CUDAVisibleDevices: "0,1"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := ReadJobEnv(root, 1); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "1", "environ")) {
		t.Errorf("missing process: %v", err)
	}
	if e := ParseJobEnv([]byte("SLURM_JOBID=5\x00")); e.JobID != "5" {
		t.Errorf("SLURM_JOBID: %+v", e)
	}
	if e := ParseJobEnv([]byte("SLURM_JOB_ID=5;rm\x00")); e.JobID != "" {
		t.Errorf("invalid job id kept: %+v", e)
	}
}

// What an accounting tick pays for Slurm's allocations once they are
// cached: building the answer from the caches and matching it to the GPUs
// ("build", what every tick did) against the answer kept while the caches
// and the GPUs stand ("cached").
func BenchmarkNodeAllocationsListCached(b *testing.B) {
	job := "JobId=102 JobName=md UserId=bob(1001) Account=chem JobState=RUNNING Reason=None Partition=gpu " +
		"NodeList=gpu-01 NumNodes=1 NumCPUs=8 TRES=cpu=8,node=1 Nodes=gpu-01 CPU_IDs=32-39 Mem=0 GRES=gpu:a100:2(IDX:0-1)\n"
	r := &scriptedRunner{fn: func(args []string) ([]byte, error) {
		if args[0] == "squeue" {
			return []byte("102\n"), nil
		}
		return []byte(job), nil
	}}
	l, err := NewJobLookup(JobLookupOptions{Runner: r, ListInterval: time.Hour, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	n := &NodeAllocations{Lookup: l, Node: "gpu-01"}
	var devices []snapshot.Device
	for i := range 8 {
		devices = append(devices, snapshot.Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i)})
	}
	if _, err := n.List(context.Background(), devices); err != nil {
		b.Fatal(err)
	}
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			allocs, _, _ := l.CachedAllocations("gpu-01")
			ToSnapshotAllocations(allocs, devices)
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			n.ListCached(devices)
		}
	})
}

// NodeAllocations' kept answer does not outlive a job's answer dropped
// from a full cache while still fresh (the lookup keeps at most
// maxCachedJobs; past that the oldest half goes).
func TestNodeAllocationsListCachedAfterTheCacheDroppedAJob(t *testing.T) {
	r := &scriptedRunner{fn: func(args []string) ([]byte, error) {
		switch strings.Join(args, " ") {
		case "squeue -h -w gpu-01 -t RUNNING -o %i":
			return []byte("102\n"), nil
		case "scontrol show job -d -o 102":
			return []byte("JobId=102 JobName=md UserId=bob(1001) Account=chem JobState=RUNNING Reason=None Partition=gpu " +
				"NodeList=gpu-01 NumNodes=1 NumCPUs=8 TRES=cpu=8,node=1 Nodes=gpu-01 CPU_IDs=32-39 Mem=0 GRES=gpu:a100:1(IDX:0)\n"), nil
		}
		return nil, fmt.Errorf("unexpected %v", args)
	}}
	l, advance := lookupOnAClock(t, r)
	n := &NodeAllocations{Lookup: l, Node: "gpu-01"}
	devices := []snapshot.Device{{Index: 0, UUID: "GPU-aaa"}}
	if _, err := n.List(context.Background(), devices); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.ListCached(devices); !ok {
		t.Fatal("no answer from fresh caches")
	}
	// Other jobs looked up since, every one fresh, fill the cache.
	advance(time.Second)
	l.mu.Lock()
	for i := range maxCachedJobs {
		l.jobs[fmt.Sprint(1000+i)] = &jobEntry{at: l.opts.Now()}
	}
	l.pruneLocked()
	_, kept := l.jobs["102"]
	l.mu.Unlock()
	if kept {
		t.Fatal("job 102, the oldest, was kept")
	}
	if got, ok := n.ListCached(devices); ok {
		t.Errorf("job 102's answer was dropped: ListCached = %+v, want no answer", got)
	}
}
