package webui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

type fakeSource struct {
	snap  *snapshot.Snapshot
	err   error
	calls int
}

func (f *fakeSource) Snapshot(context.Context) (*snapshot.Snapshot, error) {
	f.calls++
	return f.snap, f.err
}

func testSnapshot(at time.Time) *snapshot.Snapshot {
	return &snapshot.Snapshot{
		Time: at, DriverVersion: "550.90.07",
		Devices: []snapshot.Device{
			{
				Index: 0, UUID: "GPU-0", Up: true,
				Info:        snapshot.Info{Name: "NVIDIA H100 80GB HBM3", MIGMode: "enabled"},
				Utilization: snapshot.Utilization{GPU: snapshot.Some(0.5)},
				Memory:      snapshot.Memory{Total: snapshot.Some[uint64](80 << 30), Used: snapshot.Some[uint64](10 << 30)},
				Temperature: snapshot.Temperature{GPU: snapshot.Some(41.0)},
				Power:       snapshot.Power{Usage: snapshot.Some(300.0)},
				Clocks:      []snapshot.Clock{{Type: "sm", Current: snapshot.Some(1.98e9)}},
				ClockEvents: []snapshot.ClockEvent{{Reason: "sw_power_cap", Active: true}, {Reason: "hw_slowdown"}},
				XIDEvents:   snapshot.Some[uint64](2), XIDLastCode: snapshot.Some[uint64](79),
				MIGInstances: []snapshot.MIGInstance{{GPUInstanceID: 1, ComputeInstanceID: 0, UUID: "MIG-a", Profile: "3g.40gb",
					MemoryTotal: snapshot.Some[uint64](40 << 30), MemoryUsed: snapshot.Some[uint64](1 << 30)}},
			},
			{Index: 1, UUID: "GPU-1", Up: false, DownReason: "gpu_is_lost"},
		},
		Processes: []snapshot.Process{
			{GPU: 0, GPUUUID: "GPU-0", PID: 100, Type: "compute", UsedMemory: snapshot.Some[uint64](1 << 30), SMUtilization: snapshot.Some(0.25),
				Owner: snapshot.Owner{User: "alice", Slurm: snapshot.SlurmJob{JobID: "42", User: "alice"}}},
			{GPU: 0, GPUUUID: "GPU-0", PID: 101, Type: "compute", UsedMemory: snapshot.Some[uint64](2 << 30),
				Owner: snapshot.Owner{User: "bob", Container: snapshot.Container{Name: "train-1", ComposeProject: "lab", ComposeService: "train"}}},
		},
	}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestSnapshotAPI(t *testing.T) {
	src := &fakeSource{snap: testSnapshot(time.Unix(1000, 0))}
	rec := newTestRecorder(t, src, time.Second, time.Minute)
	h := Handler(rec, Options{TelemetryPath: "/metrics", Simulated: true})
	code, body := get(t, h, "/api/v1/snapshot")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["simulated"] != true || doc["clock"] != "simulated" || doc["interval_seconds"] != 1.0 {
		t.Errorf("header fields wrong: %v", body)
	}
	devs := doc["devices"].([]any)
	if len(devs) != 2 {
		t.Fatalf("%d devices, want 2", len(devs))
	}
	d0 := devs[0].(map[string]any)
	for k, want := range map[string]any{
		"index": 0.0, "uuid": "GPU-0", "up": true, "utilization_gpu": 0.5, "memory_used_bytes": float64(10 << 30),
		"temperature_celsius": 41.0, "power_watts": 300.0, "mig_mode": "enabled",
	} {
		if d0[k] != want {
			t.Errorf("devices[0].%s = %v, want %v", k, d0[k], want)
		}
	}
	if _, ok := d0["power_limit_watts"]; ok {
		t.Error("absent power limit reported instead of left out")
	}
	if tr := d0["throttle_reasons"].([]any); len(tr) != 1 || tr[0] != "sw_power_cap" {
		t.Errorf("throttle_reasons = %v, want only the active sw_power_cap", tr)
	}
	if h := d0["health"].(map[string]any); h["xid_events"] != 2.0 || h["xid_last_code"] != 79.0 {
		t.Errorf("health = %v", h)
	}
	mig := d0["mig_instances"].([]any)
	if len(mig) != 1 || mig[0].(map[string]any)["profile"] != "3g.40gb" {
		t.Errorf("mig_instances = %v", mig)
	}
	d1 := devs[1].(map[string]any)
	if d1["up"] != false || d1["down_reason"] != "gpu_is_lost" {
		t.Errorf("lost GPU: %v", d1)
	}
}

func TestProcessesAPIHasOwners(t *testing.T) {
	src := &fakeSource{snap: testSnapshot(time.Unix(1000, 0))}
	rec := newTestRecorder(t, src, time.Second, time.Minute)
	rec.Record(src.Snapshot(context.Background()))
	code, body := get(t, Handler(rec, Options{TelemetryPath: "/metrics"}), "/api/v1/processes")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var doc struct {
		Clock     string `json:"clock"`
		Processes []struct {
			PID       int               `json:"pid"`
			User      string            `json:"user"`
			Memory    uint64            `json:"used_memory_bytes"`
			SM        *float64          `json:"sm_utilization"`
			Slurm     map[string]string `json:"slurm"`
			Container map[string]string `json:"container"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Clock != "wall" || len(doc.Processes) != 2 {
		t.Fatalf("clock %q, %d processes: %s", doc.Clock, len(doc.Processes), body)
	}
	p0, p1 := doc.Processes[0], doc.Processes[1]
	if p0.PID != 100 {
		p0, p1 = p1, p0
	}
	if p0.User != "alice" || p0.Slurm["job_id"] != "42" || p0.Memory != 1<<30 || p0.SM == nil || *p0.SM != 0.25 {
		t.Errorf("process 100: %+v", p0)
	}
	if p1.Container["compose_service"] != "train" || p1.SM != nil {
		t.Errorf("process 101: %+v (absent SM must be left out)", p1)
	}
	if src.calls != 1 {
		t.Errorf("the API collected %d times; it must serve the recorder's snapshot", src.calls-1)
	}
}

func TestAPIWhenCollectionFails(t *testing.T) {
	src := &fakeSource{err: errors.New("nvml: driver not loaded")}
	rec := newTestRecorder(t, src, time.Second, time.Minute)
	rec.Record(src.Snapshot(context.Background()))
	code, body := get(t, Handler(rec, Options{}), "/api/v1/snapshot")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "driver not loaded") {
		t.Errorf("status %d body %s", code, body)
	}
	// A later failure keeps the last good snapshot and says why it is old.
	src.snap, src.err = testSnapshot(time.Unix(1000, 0)), nil
	rec.Record(src.Snapshot(context.Background()))
	rec.Record(nil, errors.New("timeout"))
	code, body = get(t, Handler(rec, Options{}), "/api/v1/snapshot")
	if code != 200 || !strings.Contains(body, `"error":"timeout"`) || !strings.Contains(body, "GPU-0") {
		t.Errorf("status %d body %s", code, body)
	}
}

func TestHistoryAPI(t *testing.T) {
	src := &fakeSource{}
	rec := newTestRecorder(t, src, time.Second, 3*time.Second)
	for i := range 5 {
		s := testSnapshot(time.Unix(int64(1000+i), 0))
		s.Devices[0].Utilization.GPU = snapshot.Some(float64(i) / 10)
		rec.Record(s, nil)
	}
	code, body := get(t, Handler(rec, Options{}), "/api/v1/history")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	var doc struct {
		MaxSamples int `json:"max_samples"`
		GPUs       []struct {
			Index int        `json:"index"`
			Time  []int64    `json:"time_ms"`
			Util  []*float64 `json:"utilization_gpu"`
		} `json:"gpus"`
		Owners []struct {
			Kind, Name string
			Memory     []*float64 `json:"memory_used_bytes"`
		} `json:"owners"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.MaxSamples != 3 || len(doc.GPUs) != 2 {
		t.Fatalf("max_samples %d, %d GPUs: %s", doc.MaxSamples, len(doc.GPUs), body)
	}
	g0 := doc.GPUs[0]
	if len(g0.Time) != 3 || g0.Time[0] != 1002000 || g0.Time[2] != 1004000 {
		t.Errorf("GPU 0 times %v, want the newest 3, oldest first", g0.Time)
	}
	if g0.Util[0] == nil || *g0.Util[0] < 0.19 || *g0.Util[0] > 0.21 {
		t.Errorf("GPU 0 utilization %v", g0.Util)
	}
	if g1 := doc.GPUs[1]; g1.Util[0] != nil {
		t.Errorf("the down GPU's utilization is %v, want null", *g1.Util[0])
	}
	if len(doc.Owners) != 2 || doc.Owners[0].Kind != "compose_service" || doc.Owners[0].Name != "lab/train" ||
		doc.Owners[1].Kind != "slurm_job" || doc.Owners[1].Name != "42" {
		t.Fatalf("owners %+v", doc.Owners)
	}
	// History keeps float32: exact to 7 digits, plenty for a chart.
	if m := doc.Owners[1].Memory; len(m) != 3 || m[2] == nil || math.Abs(*m[2]-float64(1<<30)) > 1e-6*float64(1<<30) {
		t.Errorf("slurm job 42 memory %v", m)
	}
}

func TestOwnersAgeOutAndAreBounded(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, time.Second, 2*time.Second)
	at := time.Unix(1000, 0)
	s := testSnapshot(at)
	rec.Record(s, nil)
	// Ten seconds later nobody from before is on the GPU: their history ages out.
	later := testSnapshot(at.Add(10 * time.Second))
	later.Processes = nil
	rec.Record(later, nil)
	if o := rec.History().Owners; len(o) != 0 {
		t.Errorf("owners gone past the window still held: %+v", o)
	}
	many := testSnapshot(at.Add(11 * time.Second))
	many.Processes = nil
	for i := range MaxOwners + 5 {
		many.Processes = append(many.Processes, snapshot.Process{PID: uint32(i), UsedMemory: snapshot.Some[uint64](1),
			Owner: snapshot.Owner{User: "u" + string(rune('A'+i%26)) + string(rune('a'+i/26))}})
	}
	rec.Record(many, nil)
	h := rec.History()
	if len(h.Owners) != MaxOwners || h.OwnersDropped != 5 {
		t.Errorf("%d owners held, %d dropped; want %d and 5", len(h.Owners), h.OwnersDropped, MaxOwners)
	}
}

func TestPage(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, time.Second, time.Minute)
	code, body := get(t, Handler(rec, Options{TelemetryPath: "/m", Simulated: true}), "/")
	if code != 200 || !strings.Contains(body, `href="./m"`) || !strings.Contains(body, "sim-banner") {
		t.Errorf("page: %d %s", code, body)
	}
	if strings.Contains(body, "/debug/pprof") {
		t.Error("pprof link shown while pprof is off")
	}
	_, body = get(t, Handler(rec, Options{TelemetryPath: "/m", Pprof: true}), "/")
	if !strings.Contains(body, `href="debug/pprof/"`) || strings.Contains(body, "sim-banner") {
		t.Error("pprof link missing with pprof on, or simulator banner shown for a real backend")
	}
	if code, _ := get(t, Handler(rec, Options{}), "/nothing-here"); code != 404 {
		t.Errorf("unknown path: %d, want 404", code)
	}
	if code, body := get(t, Handler(rec, Options{}), "/assets/app.js"); code != 200 || !strings.Contains(body, `"api/v1/snapshot"`) {
		t.Errorf("app.js: %d", code)
	}
}

// TestPageURLsAreRelative: behind a reverse proxy that serves gpuwatch
// under a path prefix (/gpu/), a URL starting with "/" would leave the
// prefix; every link, asset and API call of the page is relative to it.
func TestPageURLsAreRelative(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, time.Second, time.Minute)
	_, page := get(t, Handler(rec, Options{TelemetryPath: "/custom/metrics", Pprof: true}), "/")
	if !strings.Contains(page, `href="./custom/metrics"`) {
		t.Errorf("the metrics link is not relative:\n%s", page)
	}
	absolute := regexp.MustCompile(`(href|src)="/`)
	if m := absolute.FindAllString(page, -1); len(m) > 0 {
		t.Errorf("the page has absolute URLs %q:\n%s", m, page)
	}
	js, err := assets.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`"/(api|assets)/`).FindAllString(string(js), -1); len(m) > 0 {
		t.Errorf("app.js asks for absolute paths %q", m)
	}
}

func TestAssetsUnder200KB(t *testing.T) {
	total := 0
	for _, name := range []string{"assets/index.html", "assets/app.js", "assets/app.css"} {
		b, err := assets.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
	}
	if total > 200<<10 {
		t.Errorf("assets are %d bytes; the budget is 200 KB", total)
	}
}

func TestCheckFlags(t *testing.T) {
	for _, c := range []struct {
		interval, history time.Duration
		want              string
	}{
		{0, time.Hour, "--ui.interval=0s: must be positive"},
		{time.Millisecond, time.Hour, "at least 100ms"},
		{time.Minute, time.Second, "--ui.history=1s: must be at least --ui.interval"},
		{time.Second, 48 * time.Hour, "at most 86400"},
	} {
		err := CheckFlags(c.interval, c.history)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckFlags(%s, %s) = %v, want %q", c.interval, c.history, err, c.want)
		}
	}
	if err := CheckFlags(15*time.Second, time.Hour); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}

// TestHistoryJSONEncodedOncePerCollection: pages polling between two
// collections get the same encoding; a new collection renews it.
func TestHistoryJSONEncodedOncePerCollection(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, time.Second, time.Minute)
	rec.Record(testSnapshot(time.Unix(1000, 0)), nil)
	a, err := rec.HistoryJSON(-1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := rec.HistoryJSON(-1)
	if &a[0] != &b[0] {
		t.Error("history encoded again without a new collection")
	}
	rec.Record(testSnapshot(time.Unix(1001, 0)), nil)
	c, _ := rec.HistoryJSON(-1)
	if string(c) == string(a) || !strings.Contains(string(c), "1001000") {
		t.Errorf("history not renewed after a collection:\n%s", c)
	}
}

// TestAPIsCarryAllocations: /api/v1/snapshot and /api/v1/processes list
// the workloads holding each GPU in their own allocations array, the
// idle ones included, and never as process rows.
func TestAPIsCarryAllocations(t *testing.T) {
	s := testSnapshot(time.Unix(1000, 0))
	s.Allocations = []snapshot.Allocation{
		{GPU: 0, GPUUUID: "GPU-0", Slurm: snapshot.SlurmJob{JobID: "42", User: "alice"}},
		{GPU: 2, GPUUUID: "GPU-2", Slurm: snapshot.SlurmJob{JobID: "4225", User: "alice", Account: "nlp"}},
	}
	s.Devices = append(s.Devices, snapshot.Device{Index: 2, UUID: "GPU-2", Up: true})
	rec := newTestRecorder(t, &fakeSource{}, time.Second, time.Minute)
	rec.Record(s, nil)
	for _, path := range []string{"/api/v1/snapshot", "/api/v1/processes"} {
		code, body := get(t, Handler(rec, Options{}), path)
		if code != 200 {
			t.Fatalf("%s: status %d", path, code)
		}
		var doc struct {
			Processes   []map[string]any `json:"processes"`
			Allocations []struct {
				GPU   int               `json:"gpu"`
				Idle  bool              `json:"idle"`
				Slurm map[string]string `json:"slurm"`
			} `json:"allocations"`
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Allocations) != 2 || doc.Allocations[0].Idle || doc.Allocations[0].Slurm["job_id"] != "42" ||
			!doc.Allocations[1].Idle || doc.Allocations[1].GPU != 2 || doc.Allocations[1].Slurm["job_id"] != "4225" {
			t.Errorf("%s: allocations %+v, want job 42 busy on GPU 0 and job 4225 idle on GPU 2", path, doc.Allocations)
		}
		if path == "/api/v1/processes" && len(doc.Processes) != 2 {
			t.Errorf("%s: %d processes, want the 2 processes only", path, len(doc.Processes))
		}
	}
}

// TestSnapshotSaysProcessesUnknown: a GPU whose process list could not be
// read says why, so the page does not take "no process" for idle; a GPU
// whose list was read leaves the field out.
func TestSnapshotSaysProcessesUnknown(t *testing.T) {
	snap := testSnapshot(time.Unix(1000, 0))
	snap.Devices[0].ProcessesUnknown = "insufficient_size"
	snap.Devices = append(snap.Devices, snapshot.Device{Index: 2, UUID: "GPU-2", Up: true})
	rec := newTestRecorder(t, &fakeSource{snap: snap}, time.Second, time.Minute)
	_, body := get(t, Handler(rec, Options{}), "/api/v1/snapshot")
	var doc struct {
		Devices []map[string]any `json:"devices"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Devices[0]["processes_unknown"]; got != "insufficient_size" {
		t.Errorf("GPU 0: processes_unknown = %v, want insufficient_size", got)
	}
	if got, ok := doc.Devices[2]["processes_unknown"]; ok {
		t.Errorf("GPU 2, whose processes were listed: processes_unknown = %v, want it left out", got)
	}
}
