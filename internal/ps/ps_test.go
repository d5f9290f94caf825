package ps

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func testSnapshot() *snapshot.Snapshot {
	return &snapshot.Snapshot{
		Time: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC),
		Processes: []snapshot.Process{
			{GPU: 3, GPUUUID: "GPU-3", PID: 300, Type: "compute", UsedMemory: snapshot.Some[uint64](1 << 30),
				Owner: snapshot.Owner{User: "bob", Command: "python train.py", Slurm: snapshot.SlurmJob{JobID: "42", User: "bob", Partition: "gpu"}}},
			{GPU: 0, GPUUUID: "GPU-0", PID: 100, Type: "compute", UsedMemory: snapshot.Some[uint64](20 << 30), SMUtilization: snapshot.Some(0.75),
				Owner: snapshot.Owner{User: "alice", Command: "python serve.py",
					Container: snapshot.Container{Runtime: "containerd", ID: "0123456789abcdef0123", Name: "vllm"},
					Pod:       snapshot.Pod{Name: "llm-0", Namespace: "inference", Container: "vllm"}}},
			{GPU: 3, GPUUUID: "GPU-3", PID: 301, Type: "compute", UsedMemory: snapshot.Some[uint64](4 << 30),
				Owner: snapshot.Owner{UID: "1234", Command: "evil\n\x1b[31mname", Container: snapshot.Container{Name: "a\"b\nc"}}},
			{GPU: 1, GPUUUID: "GPU-1", PID: 200, Type: "compute+mps", GPUInstanceID: snapshot.Some(1), ComputeInstanceID: snapshot.Some(0), MIGUUID: "MIG-x"},
		},
	}
}

func TestTableShowsOwnersOrderedByGPUAndMemory(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, testSnapshot(), Filter{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("got %d lines:\n%s", len(lines), b.String())
	}
	for i, want := range []string{"GPU", "0 ", "1/gi1/ci0", "3 ", "3 "} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
		}
	}
	for _, want := range []string{"alice", "20.0GiB", "1.0GiB", "75%", "vllm", "inference/llm-0/vllm", "42 (bob)", "200  compute+mps "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	// The heavier process on GPU 3 (4 GiB, pid 301) comes first.
	if !strings.Contains(lines[3], "301") {
		t.Errorf("GPU 3 rows not ordered by memory: %q", lines[3])
	}
	// Control characters never reach the terminal.
	if strings.ContainsAny(b.String(), "\x1b") || strings.Count(b.String(), "\n") != 5 {
		t.Errorf("control characters leaked into the table:\n%q", b.String())
	}
}

func TestFilterByGPU(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, testSnapshot(), Filter{GPUs: []int{3}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "alice") || !strings.Contains(b.String(), "bob") {
		t.Fatalf("filter kept the wrong rows:\n%s", b.String())
	}
}

func TestJSONOmitsAbsentReadings(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, testSnapshot(), Filter{}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Processes []map[string]any `json:"processes"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Processes) != 4 {
		t.Fatalf("%d processes", len(doc.Processes))
	}
	first := doc.Processes[0]
	if first["pid"].(float64) != 100 || first["sm_utilization"].(float64) != 0.75 {
		t.Errorf("first process = %v", first)
	}
	if first["pod"].(map[string]any)["namespace"] != "inference" || first["container"].(map[string]any)["runtime"] != "containerd" {
		t.Errorf("owner not in JSON: %v", first)
	}
	mig := doc.Processes[1]
	if _, ok := mig["used_memory_bytes"]; ok {
		t.Errorf("absent memory reported: %v", mig)
	}
	if mig["gpu_instance_id"].(float64) != 1 {
		t.Errorf("MIG identity lost: %v", mig)
	}
	// Quotes and newlines survive JSON escaping intact.
	if got := doc.Processes[2]["container"].(map[string]any)["name"]; got != "a\"b\nc" {
		t.Errorf("container name = %q", got)
	}
}

func TestEmptySnapshotGivesHeaderAndEmptyList(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, &snapshot.Snapshot{}, Filter{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"processes": []`) {
		t.Fatalf("empty list not rendered as []: %s", b.String())
	}
}

func TestFilterNamingAnAbsentGPUIsAnError(t *testing.T) {
	s := &snapshot.Snapshot{Devices: make([]snapshot.Device, 8)}
	for _, tc := range []struct {
		gpus []int
		want string
	}{
		{[]int{99}, "--gpu=99: no such GPU (this host has GPUs 0-7)"},
		{[]int{0, -1}, "--gpu=-1: GPU indexes start at 0"},
		{[]int{8}, "--gpu=8"},
	} {
		err := Filter{GPUs: tc.gpus}.Check(s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%v) = %v, want %q", tc.gpus, err, tc.want)
		}
	}
	if err := (Filter{GPUs: []int{0, 7}}).Check(s); err != nil {
		t.Errorf("GPUs 0 and 7 of 8: %v", err)
	}
	if err := (Filter{GPUs: []int{0}}).Check(&snapshot.Snapshot{}); err == nil || !strings.Contains(err.Error(), "no GPU") {
		t.Errorf("no GPUs: %v", err)
	}
}

func TestJSONSaysWhichClock(t *testing.T) {
	for _, simulated := range []bool{false, true} {
		var b bytes.Buffer
		if err := WriteJSON(&b, testSnapshot(), Filter{SimulatedClock: simulated}); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Clock string `json:"clock"`
		}
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{false: "wall", true: "simulated"}[simulated]; doc.Clock != want {
			t.Errorf("simulated %v: clock %q, want %q", simulated, doc.Clock, want)
		}
	}
}

// MIG instances in number order (gi7 before gi11, whatever their memory),
// and one memory unit for the whole column.
func TestTableOrdersMIGInstancesByNumber(t *testing.T) {
	mig := func(pid uint32, gi int, mem uint64) snapshot.Process {
		return snapshot.Process{GPU: 0, PID: pid, Type: "compute", GPUInstanceID: snapshot.Some(gi),
			ComputeInstanceID: snapshot.Some(0), UsedMemory: snapshot.Some(mem)}
	}
	s := &snapshot.Snapshot{Processes: []snapshot.Process{mig(11, 11, 70<<30), mig(7, 7, 3<<30), mig(2, 2, 1<<30)}}
	var b bytes.Buffer
	if err := WriteTable(&b, s, Filter{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")[1:]
	for i, want := range []string{"0/gi2/ci0", "0/gi7/ci0", "0/gi11/ci0"} {
		if !strings.HasPrefix(lines[i], want+" ") {
			t.Errorf("row %d = %q, want %s", i, lines[i], want)
		}
	}
	for _, want := range []string{"70.0GiB", "3.0GiB", "1.0GiB"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %s:\n%s", want, b.String())
		}
	}
}

func TestUnknownNamesTheGPUsAskedForThatCouldNotBeRead(t *testing.T) {
	s := &snapshot.Snapshot{Devices: []snapshot.Device{
		{Index: 0, Up: true},
		{Index: 1, DownReason: "gpu_is_lost"},
		{Index: 2, Up: true, ProcessesUnknown: "insufficient_size"},
		{Index: 3, Up: true, ProcessesUnknown: "not_supported"},
	}}
	cases := []struct {
		gpus []int
		want []string
	}{
		{[]int{0}, nil},
		{[]int{1}, []string{"GPU 1: down (gpu_is_lost); its processes are unknown"}},
		{nil, []string{
			"GPU 1: down (gpu_is_lost); its processes are unknown",
			"GPU 2: its process list could not be read (insufficient_size); its processes are unknown",
			"GPU 3: the driver does not list its processes (not_supported); its processes are unknown",
		}},
	}
	for _, c := range cases {
		if got := (Filter{GPUs: c.gpus}).Unknown(s); !slices.Equal(got, c.want) {
			t.Errorf("--gpu=%v: %q, want %q", c.gpus, got, c.want)
		}
	}
}

// TestTableUnitsAndPartitionAsOnThePage: memory in the live page's units,
// and the partition in its own column, never glued to the user as
// "bob@gpu" (which reads as a user at a host).
func TestTableUnitsAndPartitionAsOnThePage(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, testSnapshot(), Filter{}); err != nil {
		t.Fatal(err)
	}
	header := strings.Fields(strings.SplitN(b.String(), "\n", 2)[0])
	part := slices.Index(header, "PARTITION")
	if part < 0 {
		t.Fatalf("no PARTITION column: %q", header)
	}
	if strings.Contains(b.String(), "@") {
		t.Errorf("a user is glued to something with @:\n%s", b.String())
	}
	var found bool
	for line := range strings.Lines(b.String()) {
		if !strings.Contains(line, "42 (bob)") {
			continue
		}
		found = true
		// "SLURM JOB" is two header words and "42 (bob)" two row fields,
		// so the partition sits at the header's PARTITION index.
		if f := strings.Fields(line); len(f) <= part || f[part] != "gpu" {
			t.Errorf("job 42's partition column = %q, want gpu", f)
		}
	}
	if !found {
		t.Fatalf("no row for job 42:\n%s", b.String())
	}
}

func TestBinaryBytesMatchesThePage(t *testing.T) {
	for v, want := range map[uint64]string{
		0:                "0B",
		1023:             "1023B",
		1024:             "1.0KiB",
		3 << 30:          "3.0GiB",
		75776 << 20:      "74.0GiB",
		1536 << 20:       "1.5GiB",
		(1 << 40) * 2048: "2048.0TiB",
	} {
		if got := binaryBytes(v); got != want {
			t.Errorf("binaryBytes(%d) = %q, want %q", v, got, want)
		}
	}
}
