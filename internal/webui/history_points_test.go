package webui

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// pointsDoc is /api/v1/history as a page reads it.
type pointsDoc struct {
	IntervalSeconds float64  `json:"interval_seconds"`
	BucketSeconds   float64  `json:"bucket_seconds"`
	MaxPoints       int      `json:"max_points"`
	SinceMilli      *int64   `json:"since_ms"`
	NewestMilli     *int64   `json:"newest_ms"`
	OwnersDropped   uint64   `json:"owners_dropped"`
	GPUs            []series `json:"gpus"`
	Owners          []series `json:"owners"`
}

type series struct {
	Index  int        `json:"index"`
	Kind   string     `json:"kind"`
	Name   string     `json:"name"`
	Time   []int64    `json:"time_ms"`
	Util   []*float64 `json:"utilization_gpu"`
	Memory []*float64 `json:"memory_used_bytes"`
	Power  []*float64 `json:"power_watts"`
	Temp   []*float64 `json:"temperature_celsius"`
	SM     []*float64 `json:"sm_utilization"`
}

func getHistory(t *testing.T, rec *Recorder, query string) pointsDoc {
	t.Helper()
	code, body := get(t, Handler(rec, Options{}), "/api/v1/history"+query)
	if code != 200 {
		t.Fatalf("GET /api/v1/history%s: status %d: %.200s", query, code, body)
	}
	var doc pointsDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// oneGPU is a snapshot of one GPU and one owner whose readings follow i.
func oneGPU(at time.Time, i int) *snapshot.Snapshot {
	return &snapshot.Snapshot{
		Time: at,
		Devices: []snapshot.Device{{Index: 0, UUID: "GPU-0", Up: true,
			// Utilization alternates 0 and 1; memory is 1 GiB but for one
			// sample in 100, which peaks at 2 GiB.
			Utilization: snapshot.Utilization{GPU: snapshot.Some(float64(i % 2))},
			Memory:      snapshot.Memory{Used: snapshot.Some(uint64(1+btoi(i%100 == 50)) << 30)},
			Power:       snapshot.Power{Usage: snapshot.Some(float64(100 + 100*(i%2)))},
		}},
		Processes: []snapshot.Process{{GPU: 0, PID: 1, UsedMemory: snapshot.Some(uint64(1+btoi(i%100 == 50)) << 20),
			SMUtilization: snapshot.Some(float64(i%2) / 2), Owner: snapshot.Owner{Slurm: snapshot.SlurmJob{JobID: "4211"}}}},
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestHistoryPointsBoundedAtTheMaximum: a full day at 1 s (the most
// --ui.history/--ui.interval allow) is served as at most 600 points per
// series, in buckets a whole number of intervals wide and aligned to it,
// ratios averaged and memory at its peak.
func TestHistoryPointsBoundedAtTheMaximum(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, time.Second, 24*time.Hour)
	start := time.Unix(1_700_000_000, 0)
	const n = 86400 + 500 // more than the window: the oldest fall out
	for i := range n {
		rec.Record(oneGPU(start.Add(time.Duration(i)*time.Second), i), nil)
	}
	doc := getHistory(t, rec, "")
	if doc.IntervalSeconds != 1 || doc.BucketSeconds < 144 || doc.BucketSeconds != math.Trunc(doc.BucketSeconds) {
		t.Fatalf("interval %gs, bucket %gs: want a whole number of 1 s intervals, at least 86400/600", doc.IntervalSeconds, doc.BucketSeconds)
	}
	if doc.MaxPoints > 600 {
		t.Errorf("max_points %d, want at most 600", doc.MaxPoints)
	}
	bucketMilli := int64(doc.BucketSeconds * 1000)
	for _, s := range append(doc.GPUs, doc.Owners...) {
		if len(s.Time) > 600 || len(s.Time) < 590 {
			t.Fatalf("%s%d %s: %d points, want the day in at most 600 (and not much fewer)", s.Kind, s.Index, s.Name, len(s.Time))
		}
		for i, ts := range s.Time {
			if ts%bucketMilli != 0 || (i > 0 && ts-s.Time[i-1] != bucketMilli) {
				t.Fatalf("point %d at %d: buckets must be aligned to %d ms and consecutive: %v", i, ts, bucketMilli, s.Time[max(0, i-2):i+1])
			}
		}
		newest := start.Add((n - 1) * time.Second).UnixMilli()
		if last := s.Time[len(s.Time)-1]; newest-last >= bucketMilli || newest < last {
			t.Errorf("newest point at %d does not hold the newest sample (%d)", last, newest)
		}
		if oldest := s.Time[0]; newest-oldest > 86400*1000+bucketMilli {
			t.Errorf("oldest point %d s before the newest sample: more than the 1-day window", (newest-oldest)/1000)
		}
	}
	g := doc.GPUs[0]
	mid := len(g.Time) / 2 // a full bucket: half its samples at 0, half at 1
	if u := g.Util[mid]; u == nil || math.Abs(*u-0.5) > 0.01 {
		t.Errorf("utilization of a full bucket = %v, want the mean 0.5", deref(u))
	}
	if p := g.Power[mid]; p == nil || math.Abs(*p-150) > 1 {
		t.Errorf("power of a full bucket = %v, want the mean 150 W", deref(p))
	}
	if m := g.Memory[mid]; m == nil || math.Abs(*m-float64(2<<30)) > 1e-6*float64(2<<30) {
		t.Errorf("memory of a full bucket = %v, want its peak 2 GiB", deref(m))
	}
	if g.Temp[mid] != nil {
		t.Errorf("temperature never read, yet the bucket says %v", *g.Temp[mid])
	}
	o := doc.Owners[0]
	if o.Kind != "slurm_job" || o.SM[mid] == nil || math.Abs(*o.SM[mid]-0.25) > 0.01 || o.Memory[mid] == nil || math.Abs(*o.Memory[mid]-float64(2<<20)) > 1e-6*float64(2<<20) {
		t.Errorf("owner %s %s: SM %v (want mean 0.25), memory %v (want peak 2 MiB)", o.Kind, o.Name, deref(o.SM[mid]), deref(o.Memory[mid]))
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestHistoryPointsAtTheDefaults: with a window of few samples each
// point is one interval.
func TestHistoryPointsAtTheDefaults(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, 15*time.Second, time.Hour)
	start := time.Unix(1_700_000_000, 0)
	for i := range 300 {
		rec.Record(oneGPU(start.Add(time.Duration(i)*15*time.Second), i), nil)
	}
	doc := getHistory(t, rec, "")
	if doc.BucketSeconds != 15 {
		t.Errorf("bucket %gs at a 240-sample window, want the 15 s interval", doc.BucketSeconds)
	}
	if g := doc.GPUs[0]; len(g.Time) < 240 || len(g.Time) > 241 {
		t.Errorf("%d points for an hour at 15 s, want 240", len(g.Time))
	}
}

// TestHistorySince: ?since=newest_ms answers only the points holding
// samples newer than that: nothing when nothing was recorded since, the
// growing bucket again (it changed) and the new ones once there are.
func TestHistorySince(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, time.Second, 24*time.Hour)
	start := time.Unix(1_700_000_000, 0)
	i := 0
	record := func(k int) {
		for range k {
			rec.Record(oneGPU(start.Add(time.Duration(i)*time.Second), i), nil)
			i++
		}
	}
	record(1000)
	full := getHistory(t, rec, "")
	if full.SinceMilli != nil || full.NewestMilli == nil || *full.NewestMilli != start.Add(999*time.Second).UnixMilli() {
		t.Fatalf("full answer: since_ms %v, newest_ms %v", full.SinceMilli, full.NewestMilli)
	}
	q := "?since=" + strconv.FormatInt(*full.NewestMilli, 10)
	none := getHistory(t, rec, q)
	if none.SinceMilli == nil || *none.SinceMilli != *full.NewestMilli {
		t.Fatalf("since_ms %v, want the asked %d", none.SinceMilli, *full.NewestMilli)
	}
	if len(none.GPUs) != 1 || len(none.GPUs[0].Time) != 0 || len(none.Owners) != 1 || len(none.Owners[0].Time) != 0 {
		t.Fatalf("nothing recorded since, yet: %+v", none)
	}
	bucket := int64(full.BucketSeconds * 1000)
	record(int(full.BucketSeconds) + 1) // the last bucket grows, a new one starts
	part := getHistory(t, rec, q)
	g := part.GPUs[0]
	if len(g.Time) != 2 || g.Time[0] != full.GPUs[0].Time[len(full.GPUs[0].Time)-1] || g.Time[1] != g.Time[0]+bucket {
		t.Fatalf("since the last answer: points at %v, want the grown bucket %d and the next", g.Time, full.GPUs[0].Time[len(full.GPUs[0].Time)-1])
	}
	if len(g.Util) != 2 || len(g.Memory) != 2 || len(part.Owners[0].Time) != 2 || len(part.Owners[0].SM) != 2 {
		t.Errorf("columns of unequal length: %+v", part)
	}
	// A page merging the two answers has what a full answer says.
	after := getHistory(t, rec, "")
	merged := append(full.GPUs[0].Time[:len(full.GPUs[0].Time)-1:len(full.GPUs[0].Time)-1], g.Time...)
	if fmt.Sprint(merged) != fmt.Sprint(after.GPUs[0].Time) {
		t.Errorf("merged %v…, full answer %v…", merged[len(merged)-3:], after.GPUs[0].Time[len(after.GPUs[0].Time)-3:])
	}
	if *after.GPUs[0].Util[len(after.GPUs[0].Util)-1] != *g.Util[1] {
		t.Error("the newest point differs between the full and the ?since= answer")
	}
	// A time the recorder has not reached (another gpuwatch, a restart with
	// another clock) gets the full history, flagged as such.
	future := getHistory(t, rec, "?since="+strconv.FormatInt(*after.NewestMilli+1, 10))
	if future.SinceMilli != nil || len(future.GPUs[0].Time) != len(after.GPUs[0].Time) {
		t.Errorf("since after the newest sample: since_ms %v, %d points; want the full history", future.SinceMilli, len(future.GPUs[0].Time))
	}
	for _, bad := range []string{"?since=abc", "?since=-5", "?since=1e3"} {
		if code, body := get(t, Handler(rec, Options{}), "/api/v1/history"+bad); code != 400 {
			t.Errorf("GET /api/v1/history%s: %d %s, want 400", bad, code, body)
		}
	}
}

// TestHistoryEncodedOutsideTheLock: while /api/v1/history is being
// encoded, collections are recorded and the snapshot is served.
func TestHistoryEncodedOutsideTheLock(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, time.Second, time.Hour)
	rec.Record(testSnapshot(time.Unix(1000, 0)), nil)
	encoding, release := make(chan struct{}), make(chan struct{})
	beforeEncode = func() { close(encoding); <-release }
	defer func() { beforeEncode = func() {} }()
	served := make(chan []byte)
	go func() {
		b, _ := rec.HistoryJSON(-1)
		served <- b
	}()
	<-encoding
	recorded := make(chan struct{})
	go func() {
		rec.Record(testSnapshot(time.Unix(1001, 0)), nil)
		_, _ = rec.Latest()
		close(recorded)
	}()
	select {
	case <-recorded:
	case <-time.After(30 * time.Second):
		t.Fatal("a collection waited for the history's encoding")
	}
	close(release)
	if b := <-served; len(b) == 0 {
		t.Error("no history served")
	}
}
