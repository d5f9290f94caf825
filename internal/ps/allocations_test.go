package ps

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// allocSnapshot is a node where Slurm job 42 runs on GPU 0, job 4225 of
// alice holds GPU 5 with nothing running, pod inference/vllm-0 holds GPU 6
// (idle), pod ml/eval holds a MIG instance of GPU 7 and runs there, and
// job 42 also holds GPU 3, which is down.
func allocSnapshot() *snapshot.Snapshot {
	job42 := snapshot.SlurmJob{JobID: "42", User: "bob", Account: "ml", Partition: "gpu"}
	eval := snapshot.Pod{Namespace: "ml", Name: "eval", Container: "main"}
	s := &snapshot.Snapshot{
		Time: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC),
		Devices: []snapshot.Device{{Index: 0, UUID: "GPU-0", Up: true}, {Index: 3, UUID: "GPU-3", Up: false, DownReason: "gpu_is_lost"},
			{Index: 5, UUID: "GPU-5", Up: true}, {Index: 6, UUID: "GPU-6", Up: true},
			{Index: 7, UUID: "GPU-7", Up: true, MIGInstances: []snapshot.MIGInstance{{GPUInstanceID: 2, ComputeInstanceID: 0, UUID: "MIG-7a"}}}},
		Processes: []snapshot.Process{
			{GPU: 0, GPUUUID: "GPU-0", PID: 100, Type: "compute", UsedMemory: snapshot.Some[uint64](1 << 30),
				Owner: snapshot.Owner{User: "bob", Command: "python train.py", Slurm: job42}},
			{GPU: 7, GPUUUID: "GPU-7", MIGUUID: "MIG-7a", GPUInstanceID: snapshot.Some(2), ComputeInstanceID: snapshot.Some(0),
				PID: 700, Type: "compute", Owner: snapshot.Owner{User: "carol", Command: "eval", Pod: eval}},
		},
		Allocations: []snapshot.Allocation{
			{GPU: 0, GPUUUID: "GPU-0", Slurm: job42},
			// GPU 3 fell off the bus: whether job 42 runs there is unknown.
			{GPU: 3, GPUUUID: "GPU-3", Slurm: job42},
			{GPU: 5, GPUUUID: "GPU-5", Slurm: snapshot.SlurmJob{JobID: "4225", User: "alice", Account: "nlp", Partition: "gpu"},
				Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("CET", 3600))},
			{GPU: 6, GPUUUID: "GPU-6", Pod: snapshot.Pod{Namespace: "inference", Name: "vllm-0", Container: "vllm"}},
			// A time-sliced GPU is listed once per replica; shown once.
			{GPU: 6, GPUUUID: "GPU-6", Pod: snapshot.Pod{Namespace: "inference", Name: "vllm-0", Container: "vllm"}},
			{GPU: 7, GPUUUID: "GPU-7", MIGUUID: "MIG-7a", Pod: eval},
		},
	}
	return s
}

// TestTableListsIdleAllocations: a GPU that a workload holds with no
// process on it gets a row of its own, in GPU order; a busy allocation
// adds none (its processes say who is there), nor does one on a GPU that
// is down (its processes are unknown, not absent).
func TestTableListsIdleAllocations(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, allocSnapshot(), Filter{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("want the header, 2 processes and 2 idle allocations, got %d lines:\n%s", len(lines), b.String())
	}
	for i, want := range []string{"GPU", "0 ", "5 ", "6 ", "7/gi2/ci0"} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
		}
	}
	for _, want := range []string{"alice", "4225 (alice)", "idle"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("GPU 5's row lacks %q: %q", want, lines[2])
		}
	}
	for _, want := range []string{"inference/vllm-0/vllm", "idle"} {
		if !strings.Contains(lines[3], want) {
			t.Errorf("GPU 6's row lacks %q: %q", want, lines[3])
		}
	}
	// An idle allocation has no PID and no memory reading: "-", never 0.
	if f := strings.Fields(lines[2]); f[1] != "-" || !strings.Contains(lines[2], " - ") || strings.Contains(lines[2], "0MiB") {
		t.Errorf("GPU 5's row: %q", lines[2])
	}
	var only bytes.Buffer
	if err := WriteTable(&only, allocSnapshot(), Filter{GPUs: []int{5}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(only.String(), "\n"); got != 2 || !strings.Contains(only.String(), "4225") {
		t.Errorf("ps --gpu=5 shows:\n%s", only.String())
	}
}

// TestJSONCarriesAllocations: the JSON lists every allocation in its own
// array, each saying whether it is idle; processes stay processes.
func TestJSONCarriesAllocations(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, allocSnapshot(), Filter{}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Processes   []map[string]any `json:"processes"`
		Allocations []struct {
			GPU     int               `json:"gpu"`
			UUID    string            `json:"gpu_uuid"`
			MIGUUID string            `json:"mig_uuid"`
			GI      *int              `json:"gpu_instance_id"`
			Idle    *bool             `json:"idle"`
			Slurm   map[string]string `json:"slurm"`
			Pod     map[string]string `json:"pod"`
			Command *string           `json:"command"`
			Start   *string           `json:"start_time"`
		} `json:"allocations"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Processes) != 2 {
		t.Errorf("%d processes, want 2: allocations are not process rows", len(doc.Processes))
	}
	if len(doc.Allocations) != 5 {
		t.Fatalf("%d allocations, want 5 (the time-sliced one once):\n%s", len(doc.Allocations), b.String())
	}
	want := []struct {
		gpu   int
		idle  string
		owner string
	}{{0, "false", "42"}, {3, "absent", "42"}, {5, "true", "4225"}, {6, "true", "vllm-0"}, {7, "false", "eval"}}
	for i, a := range doc.Allocations {
		w := want[i]
		owner := a.Slurm["job_id"] + a.Pod["name"]
		idle := "absent"
		if a.Idle != nil {
			idle = strconv.FormatBool(*a.Idle)
		}
		if a.GPU != w.gpu || idle != w.idle || owner != w.owner {
			t.Errorf("allocation %d: GPU %d idle %s owner %q; want GPU %d idle %s owner %q", i, a.GPU, idle, owner, w.gpu, w.idle, w.owner)
		}
		if a.Command != nil {
			t.Errorf("allocation %d has a command", i)
		}
	}
	if a := doc.Allocations[2]; a.UUID != "GPU-5" || a.Slurm["user"] != "alice" || a.Slurm["account"] != "nlp" {
		t.Errorf("job 4225's allocation: %+v", a)
	}
	// The start when the source gives one (Slurm), in UTC; absent, never
	// a made-up time, when it does not (the kubelet).
	for i, a := range doc.Allocations {
		got, want := "absent", "absent"
		if a.Start != nil {
			got = *a.Start
		}
		if i == 2 {
			want = "2025-12-31T23:00:00Z"
		}
		if got != want {
			t.Errorf("allocation %d: start_time %s, want %s", i, got, want)
		}
	}
	if a := doc.Allocations[4]; a.MIGUUID != "MIG-7a" || a.GI == nil || *a.GI != 2 {
		t.Errorf("the MIG allocation lost its instance: %+v", a)
	}
	var empty bytes.Buffer
	if err := WriteJSON(&empty, &snapshot.Snapshot{}, Filter{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(empty.String(), `"allocations": []`) {
		t.Errorf("no allocations not rendered as []: %s", empty.String())
	}
}

// TestAllocationNotIdleWhenProcessesUnknown: a GPU whose process list
// could not be read (or a driver without the process functions) has no
// process rows, but that does not make its allocation idle: idle is left
// out, and a process that was read still makes it busy.
func TestAllocationNotIdleWhenProcessesUnknown(t *testing.T) {
	job := snapshot.SlurmJob{JobID: "4225", User: "alice"}
	s := &snapshot.Snapshot{
		Devices: []snapshot.Device{
			{Index: 0, UUID: "GPU-0", Up: true, ProcessesUnknown: "insufficient_size"},
			{Index: 1, UUID: "GPU-1", Up: true, ProcessesUnknown: "insufficient_size"},
			{Index: 2, UUID: "GPU-2", Up: true},
		},
		Processes:   []snapshot.Process{{GPU: 1, GPUUUID: "GPU-1", PID: 10}},
		Allocations: []snapshot.Allocation{{GPU: 0, GPUUUID: "GPU-0", Slurm: job}, {GPU: 1, GPUUUID: "GPU-1", Slurm: job}, {GPU: 2, GPUUUID: "GPU-2", Slurm: job}},
	}
	idle := func(allocs []Allocation) []string {
		var out []string
		for _, a := range allocs {
			if a.Idle == nil {
				out = append(out, "absent")
			} else {
				out = append(out, strconv.FormatBool(*a.Idle))
			}
		}
		return out
	}
	if got, want := idle(NewAllocations(s, Filter{})), []string{"absent", "false", "true"}; !slices.Equal(got, want) {
		t.Errorf("idle = %v, want %v: unknown, busy by a process read, idle", got, want)
	}
	s.Driver.Limits = []snapshot.DriverLimit{{Group: snapshot.GroupProcesses, Unavailable: true}}
	s.Processes = nil
	if got, want := idle(NewAllocations(s, Filter{})), []string{"absent", "absent", "absent"}; !slices.Equal(got, want) {
		t.Errorf("with a driver that lists no processes, idle = %v, want %v", got, want)
	}
}
