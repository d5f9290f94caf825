package health

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Judge applies a policy to successive snapshots. It is a pipeline
// enricher (last of them: it reads what the others filled in) and is safe
// for concurrent use, though a pipeline hands it one snapshot at a time.
type Judge struct {
	policy Policy

	mu   sync.Mutex
	gpus map[string]*gpuMemory
	// expect is the GPU count the node must have; 0 until the first
	// snapshot when the policy names none.
	expect    int
	countLow  time.Time // when the count was first seen low; zero while it is not
	lastCheck time.Time
}

// gpuMemory is what the judge remembers of one GPU between snapshots.
type gpuMemory struct {
	// xids holds, per code, what has been seen since the GPU's last reset.
	xids map[uint64]*xidSeen
	// counted is the watcher's count per code at the GPU's last reset:
	// only events past it count.
	counted map[uint64]uint64
	// wasDown is set while the GPU is down, so that its return is read as
	// a reset.
	wasDown bool
	// activeLinks holds the NVLinks seen active.
	activeLinks map[int]bool
	// slowdownSince is when the hardware slowdown was first seen in an
	// unbroken run of readings; zero when the last reading had none.
	slowdownSince time.Time
	// silentSince is when the GPU was first seen not answering in an
	// unbroken run; zero when it answered.
	silentSince time.Time
	// firstSeen records when each failing condition was first seen, by
	// check, so a verdict keeps its start while the condition holds.
	firstSeen map[string]time.Time
}

type xidSeen struct {
	// count is how many the snapshots' XID watcher counted; logged how
	// many came from elsewhere (RecordXID).
	count, logged uint64
	first, last   time.Time
}

// NewJudge returns a judge of policy.
func NewJudge(policy Policy) *Judge {
	return &Judge{policy: policy, gpus: map[string]*gpuMemory{}, expect: policy.ExpectGPUs}
}

// Enrich sets s.Health; it implements pipeline.Enricher and never blocks.
func (j *Judge) Enrich(_ context.Context, s *snapshot.Snapshot) {
	s.Health = j.Judge(s)
}

// Judge returns the verdicts on s, after remembering what s adds to the
// history. Snapshots must come in time order; an older one than the last
// judged is judged without changing the history.
func (j *Judge) Judge(s *snapshot.Snapshot) *snapshot.Health {
	j.mu.Lock()
	defer j.mu.Unlock()
	h := &snapshot.Health{GPUs: make([]snapshot.GPUHealth, 0, len(s.Devices))}
	for i := range s.Devices {
		h.GPUs = append(h.GPUs, j.judgeGPU(&s.Devices[i], s.Time))
	}
	if c, ok := j.countCheck(len(s.Devices), s.Time); ok {
		h.Node = append(h.Node, c)
	}
	j.lastCheck = s.Time
	h.Status, h.Reason = snapshot.HealthOK, ""
	for _, g := range h.GPUs {
		if snapshot.HealthRank(g.Status) > snapshot.HealthRank(h.Status) {
			h.Status, h.Reason = g.Status, g.Reason
		}
	}
	for _, c := range h.Node {
		if snapshot.HealthRank(c.Status) > snapshot.HealthRank(h.Status) {
			h.Status, h.Reason = c.Status, "node: "+c.Reason
		}
	}
	return h
}

// RecordXID adds an XID seen outside the snapshots (the kernel log's
// NVRM: Xid lines from before gpuwatch started) to the GPU's history.
func (j *Judge) RecordXID(uuid string, code uint64, at time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recordXID(uuid, code, at)
}

// recordXID is RecordXID with j.mu held; key is the GPU's gpuKey.
func (j *Judge) recordXID(key string, code uint64, at time.Time) {
	m := j.memory(key)
	seen := m.xids[code]
	if seen == nil {
		m.xids[code] = &xidSeen{logged: 1, first: at, last: at}
		return
	}
	seen.logged++
	seen.first = minTime(seen.first, at)
	seen.last = maxTime(seen.last, at)
}

func (j *Judge) memory(key string) *gpuMemory {
	m := j.gpus[key]
	if m == nil {
		m = &gpuMemory{xids: map[uint64]*xidSeen{}, counted: map[uint64]uint64{}, activeLinks: map[int]bool{}, firstSeen: map[string]time.Time{}}
		j.gpus[key] = m
	}
	return m
}

func gpuKey(d *snapshot.Device) string {
	if d.UUID != "" {
		return d.UUID
	}
	return fmt.Sprintf("index:%d", d.Index)
}

// finding is one check's outcome before it becomes a HealthCheck.
type finding struct {
	name   string
	level  Level // LevelOff: passing
	status string
	reason string
	// at is when the condition began, when the check knows it (an XID's
	// time); zero lets the judge use when it first saw the condition.
	at time.Time
}

func (j *Judge) judgeGPU(d *snapshot.Device, now time.Time) snapshot.GPUHealth {
	m := j.memory(gpuKey(d))
	fresh := !now.Before(j.lastCheck)
	var found []finding
	if !d.Up {
		found = j.downChecks(m, d, now, fresh)
	} else {
		if fresh {
			m.noteUp()
			m.silentSince = time.Time{}
		}
		found = j.upChecks(m, d, now, fresh)
	}
	return m.verdict(d, found, now)
}

// downChecks judges a GPU that did not answer: lost, or silent. Its XID
// history still counts: the XID that announced the loss is the cause.
func (j *Judge) downChecks(m *gpuMemory, d *snapshot.Device, now time.Time, fresh bool) []finding {
	if fresh {
		m.wasDown = true
		m.noteXIDs(d, now)
	}
	var found []finding
	if d.DownReason == "not_answering" {
		found = append(found, j.silence(m, now, fresh))
	} else if l := j.policy.Level(CheckGPULost); l > LevelOff {
		found = append(found, finding{name: CheckGPULost, level: l,
			reason: fmt.Sprintf("lost (%s); reboot the node, or reset the GPU, and check its power and seating", d.DownReason)})
	}
	return append(found, j.xidCheck(m))
}

func (j *Judge) silence(m *gpuMemory, now time.Time, fresh bool) finding {
	if fresh && m.silentSince.IsZero() {
		m.silentSince = now
	}
	f := finding{name: CheckResponding, status: snapshot.HealthUnknown, at: m.silentSince,
		reason: "did not answer in time (a hung or very slow driver call); its health is unknown"}
	if now.Sub(m.silentSince) >= j.policy.UnresponsiveWindow {
		f.status, f.level = "", LevelFail
		f.reason = fmt.Sprintf("has not answered for %s; reset the GPU or reboot the node", now.Sub(m.silentSince).Round(time.Second))
	}
	return f
}

// noteUp reads a GPU's return after it was down as a reset: its XID
// history starts again from the watcher's counts.
func (m *gpuMemory) noteUp() {
	if !m.wasDown {
		return
	}
	m.wasDown = false
	for code, seen := range m.xids {
		m.counted[code] += seen.count
	}
	clear(m.xids)
	clear(m.activeLinks)
}

// noteXIDs adds the events the watcher counted since the last snapshot.
func (m *gpuMemory) noteXIDs(d *snapshot.Device, now time.Time) {
	for _, c := range d.XIDErrors {
		past := m.counted[c.XID]
		if seen := m.xids[c.XID]; seen != nil {
			past += seen.count
		}
		if c.Count <= past {
			continue
		}
		seen := m.xids[c.XID]
		if seen == nil {
			seen = &xidSeen{first: now}
			m.xids[c.XID] = seen
		}
		seen.count += c.Count - past
		seen.last = now
	}
}

func (j *Judge) upChecks(m *gpuMemory, d *snapshot.Device, now time.Time, fresh bool) []finding {
	if fresh {
		m.noteXIDs(d, now)
	}
	found := []finding{{name: CheckGPULost, level: LevelOff}, {name: CheckResponding, level: LevelOff}, j.xidCheck(m)}
	found = append(found, j.memoryChecks(d)...)
	if f, ok := j.nvlinkCheck(m, d, fresh); ok {
		found = append(found, f)
	}
	if f, ok := j.slowdownCheck(m, d, now, fresh); ok {
		found = append(found, f)
	}
	return found
}

// xidCheck reports the worst XID counted since the GPU's last reset: the
// highest level, then the newest, then the lowest code.
func (j *Judge) xidCheck(m *gpuMemory) finding {
	f := finding{name: CheckXID}
	if j.policy.Level(CheckXID) == LevelOff {
		return f
	}
	var codes []uint64
	for code := range m.xids {
		if j.policy.XIDLevel(code) > LevelOff {
			codes = append(codes, code)
		}
	}
	if len(codes) == 0 {
		return f
	}
	slices.SortFunc(codes, func(a, b uint64) int {
		if la, lb := j.policy.XIDLevel(a), j.policy.XIDLevel(b); la != lb {
			return int(lb - la)
		}
		if c := m.xids[b].last.Compare(m.xids[a].last); c != 0 {
			return c
		}
		return int(a) - int(b)
	})
	worst := codes[0]
	seen := m.xids[worst]
	f.level, f.at = j.policy.XIDLevel(worst), seen.first
	what, action := describeXID(worst)
	when := "at " + seen.last.UTC().Format(time.RFC3339)
	if n := seen.count + seen.logged; n > 1 {
		when = fmt.Sprintf("%d times, last at %s", n, seen.last.UTC().Format(time.RFC3339))
	}
	f.reason = fmt.Sprintf("XID %d (%s): %s; %s", worst, when, what, action)
	if len(codes) > 1 {
		others := make([]string, 0, len(codes)-1)
		for _, c := range codes[1:] {
			others = append(others, fmt.Sprint(c))
		}
		f.reason += " (also XID " + strings.Join(others, ", ") + ")"
	}
	return f
}

// memoryChecks reads the ECC and memory repair state; each check whose
// reading is absent is left out.
func (j *Judge) memoryChecks(d *snapshot.Device) []finding {
	e := d.ECC
	var found []finding
	add := func(name string, present, bad bool, reason string) {
		if !present {
			return
		}
		f := finding{name: name}
		if bad {
			f.level, f.reason = j.policy.Level(name), reason
		}
		found = append(found, f)
	}
	n, ok := e.VolatileUncorrected.Get()
	add(CheckECCUncorrectable, ok, n > 0, fmt.Sprintf("%d uncorrectable ECC error(s) since the driver loaded; drain the GPU's jobs, then reset the GPU", n))
	v, ok := e.RemappedRowsFailure.Get()
	add(CheckRowRemapFailure, ok, v, "a memory row remapping failed; drain the GPU and replace it (NVIDIA RMA criterion)")
	v, ok = e.RemappedRowsPending.Get()
	add(CheckRowRemapPending, ok, v, "a memory row remap waits for a GPU reset; drain the GPU's jobs, then reset the GPU")
	v, ok = e.RetiredPagesPending.Get()
	add(CheckRetiredPagesPending, ok, v, "a retired memory page waits for a driver reload; drain the GPU's jobs, then reset the GPU or reload the driver")
	return found
}

func (j *Judge) nvlinkCheck(m *gpuMemory, d *snapshot.Device, fresh bool) (finding, bool) {
	if d.NVLinks == nil {
		return finding{}, false
	}
	var down []string
	for _, l := range d.NVLinks {
		switch {
		case l.Active && fresh:
			m.activeLinks[l.Link] = true
		case !l.Active && m.activeLinks[l.Link]:
			down = append(down, fmt.Sprint(l.Link))
		}
	}
	f := finding{name: CheckNVLinkDown}
	if len(down) > 0 {
		f.level = j.policy.Level(CheckNVLinkDown)
		f.reason = fmt.Sprintf("NVLink %s down after being up; drain the GPU's jobs, then reset the GPU and check the fabric", strings.Join(down, ", "))
	}
	return f, true
}

// slowdownReasons are the clock events that mean the hardware itself holds
// the clocks down.
var slowdownReasons = []string{"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}

func (j *Judge) slowdownCheck(m *gpuMemory, d *snapshot.Device, now time.Time, fresh bool) (finding, bool) {
	if d.ClockEvents == nil {
		return finding{}, false
	}
	var active []string
	for _, e := range d.ClockEvents {
		if e.Active && slices.Contains(slowdownReasons, e.Reason) {
			active = append(active, e.Reason)
		}
	}
	if fresh {
		switch {
		case len(active) == 0:
			m.slowdownSince = time.Time{}
		case m.slowdownSince.IsZero():
			m.slowdownSince = now
		}
	}
	f := finding{name: CheckHWSlowdown}
	if len(active) > 0 && !m.slowdownSince.IsZero() && now.Sub(m.slowdownSince) >= j.policy.SlowdownWindow {
		f.level, f.at = j.policy.Level(CheckHWSlowdown), m.slowdownSince
		f.reason = fmt.Sprintf("hardware slowdown (%s) for %s; check cooling and power", strings.Join(active, ", "), now.Sub(m.slowdownSince).Round(time.Second))
	}
	return f, true
}

// countCheck compares the number of GPUs with the expected count.
func (j *Judge) countCheck(n int, now time.Time) (snapshot.HealthCheck, bool) {
	level := j.policy.Level(CheckGPUCount)
	if level == LevelOff {
		return snapshot.HealthCheck{}, false
	}
	if j.expect == 0 {
		if n == 0 {
			return snapshot.HealthCheck{}, false
		}
		j.expect = n
	}
	c := snapshot.HealthCheck{Name: CheckGPUCount, Status: snapshot.HealthOK}
	if n >= j.expect {
		j.countLow = time.Time{}
		return c, true
	}
	if j.countLow.IsZero() {
		j.countLow = now
	}
	c.Status, c.Since = statusOf(level), j.countLow
	c.Reason = fmt.Sprintf("%d GPU(s) found, %d expected; a GPU fell off the bus or was not initialised: check the kernel log, then reboot", n, j.expect)
	return c, true
}

func statusOf(l Level) string {
	switch l {
	case LevelFail:
		return snapshot.HealthFail
	case LevelWarn:
		return snapshot.HealthWarn
	}
	return snapshot.HealthOK
}

// verdict turns the findings into the GPU's verdict: the worst finding
// decides, and its line names the GPU.
func (m *gpuMemory) verdict(d *snapshot.Device, found []finding, now time.Time) snapshot.GPUHealth {
	g := snapshot.GPUHealth{GPU: d.Index, UUID: d.UUID, Status: snapshot.HealthOK}
	var worst *snapshot.HealthCheck
	var others []string
	for _, f := range found {
		c := snapshot.HealthCheck{Name: f.name, Status: f.status, Reason: f.reason}
		if c.Status == "" {
			c.Status = statusOf(f.level)
		}
		if c.Status == snapshot.HealthOK {
			c.Reason = ""
			delete(m.firstSeen, f.name)
		} else {
			c.Since = m.since(f, now)
		}
		g.Checks = append(g.Checks, c)
	}
	for i := range g.Checks {
		c := &g.Checks[i]
		if c.Status == snapshot.HealthOK {
			continue
		}
		if worst == nil || snapshot.HealthRank(c.Status) > snapshot.HealthRank(worst.Status) {
			if worst != nil {
				others = append(others, worst.Name)
			}
			worst = c
		} else {
			others = append(others, c.Name)
		}
	}
	if worst != nil {
		g.Status = worst.Status
		g.Reason = fmt.Sprintf("GPU %d (%s): %s", d.Index, orUnknown(d.UUID), worst.Reason)
		if len(others) > 0 {
			g.Reason += fmt.Sprintf(" (also: %s)", strings.Join(others, ", "))
		}
	}
	return g
}

// since is when the finding's condition began: its own time when it knows
// it, else when the judge first saw it.
func (m *gpuMemory) since(f finding, now time.Time) time.Time {
	if !f.at.IsZero() {
		m.firstSeen[f.name] = f.at
		return f.at
	}
	if t, ok := m.firstSeen[f.name]; ok {
		return t
	}
	m.firstSeen[f.name] = now
	return now
}

func orUnknown(uuid string) string {
	if uuid == "" {
		return "UUID unknown"
	}
	return uuid
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
