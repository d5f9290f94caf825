// Package ps renders the GPU processes of a snapshot, and the allocations
// (Slurm jobs, pods) holding its GPUs, for people: a terminal table
// (`gpuwatch ps`) and a JSON document (`gpuwatch ps --output=json`).
// It answers "who is on GPU 3?" without Prometheus.
package ps

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Filter selects processes; a zero Filter selects all.
type Filter struct {
	// GPUs keeps only processes on these device indexes (nil = all).
	GPUs []int
	// SimulatedClock says that the snapshot's time is the simulator's
	// clock (--backend=sim), not the wall clock; the JSON says so.
	SimulatedClock bool
}

// Check fails when the filter names a GPU the snapshot does not have, so
// that `ps --gpu=99` says so instead of printing an empty table as if the
// GPU were idle.
func (f Filter) Check(s *snapshot.Snapshot) error {
	for _, g := range f.GPUs {
		if g < 0 {
			return fmt.Errorf("--gpu=%d: GPU indexes start at 0", g)
		}
		if g >= len(s.Devices) {
			switch len(s.Devices) {
			case 0:
				return fmt.Errorf("--gpu=%d: this host has no GPU", g)
			case 1:
				return fmt.Errorf("--gpu=%d: no such GPU (this host has GPU 0 only)", g)
			}
			return fmt.Errorf("--gpu=%d: no such GPU (this host has GPUs 0-%d)", g, len(s.Devices)-1)
		}
	}
	return nil
}

// Unknown says, one line per GPU the filter asks for (every GPU when it
// names none), which GPUs' processes could not be read: a GPU that is
// down, or whose process list failed or is not supported. An empty table
// must not read as "nobody is on GPU 1" when GPU 1 could not be asked.
func (f Filter) Unknown(s *snapshot.Snapshot) []string {
	var lines []string
	for _, d := range s.Devices {
		if !f.keepGPU(d.Index) {
			continue
		}
		switch {
		case !d.Up:
			lines = append(lines, fmt.Sprintf("GPU %d: down (%s); its processes are unknown", d.Index, cell(d.DownReason)))
		case d.ProcessesUnknown == "not_supported":
			lines = append(lines, fmt.Sprintf("GPU %d: the driver does not list its processes (not_supported); its processes are unknown", d.Index))
		case d.ProcessesUnknown != "":
			lines = append(lines, fmt.Sprintf("GPU %d: its process list could not be read (%s); its processes are unknown", d.Index, cell(d.ProcessesUnknown)))
		}
	}
	return lines
}

func (f Filter) keep(p *snapshot.Process) bool { return f.keepGPU(p.GPU) }

func (f Filter) keepGPU(gpu int) bool {
	return len(f.GPUs) == 0 || slices.Contains(f.GPUs, gpu)
}

// selected returns the kept processes ordered by GPU, MIG instance (by
// number: gi7 before gi11), then memory (largest first), then PID, which
// puts the heaviest users of each GPU or instance on top.
func selected(s *snapshot.Snapshot, f Filter) []*snapshot.Process {
	var out []*snapshot.Process
	for i := range s.Processes {
		if p := &s.Processes[i]; f.keep(p) {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.GPU != b.GPU {
			return a.GPU < b.GPU
		}
		if c := compareOpt(a.GPUInstanceID, b.GPUInstanceID); c != 0 {
			return c < 0
		}
		if c := compareOpt(a.ComputeInstanceID, b.ComputeInstanceID); c != 0 {
			return c < 0
		}
		if a.UsedMemory.Value != b.UsedMemory.Value {
			return a.UsedMemory.Value > b.UsedMemory.Value
		}
		return a.PID < b.PID
	})
	return out
}

// WriteTable writes an aligned table, one row per process, and one per
// idle allocation (a GPU or MIG instance that a Slurm job or a pod holds
// with no process on it), in GPU order.
func WriteTable(w io.Writer, s *snapshot.Snapshot, f Filter) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// TYPE is which NVML process lists hold the process: compute,
	// graphics, mps (an MPS client) or a combination such as compute+mps;
	// "idle" for an idle allocation's row.
	fmt.Fprintln(tw, "GPU\tPID\tTYPE\tUSER\tMEMORY\tSM\tCONTAINER\tPOD\tSLURM JOB\tPARTITION\tCOMMAND")
	var idle []Allocation
	for _, a := range NewAllocations(s, f) {
		if a.Idle != nil && *a.Idle {
			idle = append(idle, a)
		}
	}
	writeIdle := func(beforeGPU int) {
		for len(idle) > 0 && idle[0].GPU < beforeGPU {
			a := &idle[0]
			var pod snapshot.Pod
			var job snapshot.SlurmJob
			if a.Pod != nil {
				pod = *a.Pod
			}
			if a.Slurm != nil {
				job = *a.Slurm
			}
			fmt.Fprintf(tw, "%s\t-\tidle\t%s\t-\t-\t-\t%s\t%s\t%s\t-\n",
				allocationGPUColumn(a), cell(orDash(job.User)), cell(podColumn(pod)), cell(slurmColumn(job)),
				cell(orDash(job.Partition)))
			idle = idle[1:]
		}
	}
	for _, p := range selected(s, f) {
		writeIdle(p.GPU)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			gpuColumn(p), p.PID, cell(orDash(p.Type)),
			cell(orDash(p.Owner.User, p.Owner.UID)),
			bytesColumn(p.UsedMemory),
			percentColumn(p.SMUtilization),
			cell(containerColumn(p.Owner.Container)),
			cell(podColumn(p.Owner.Pod)),
			cell(slurmColumn(p.Owner.Slurm)),
			cell(orDash(p.Owner.Slurm.Partition)),
			cell(truncate(p.Owner.Command, 60)),
		)
	}
	writeIdle(math.MaxInt)
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeVerdicts(w, s, f)
}

// writeVerdicts writes each selected GPU's health verdict and reason below
// the table, one "GPU N" line each (a prefix no process row has); nothing
// when no verdict is known: never "ok" by default.
func writeVerdicts(w io.Writer, s *snapshot.Snapshot, f Filter) error {
	verdicts := NewVerdicts(s, f)
	if len(verdicts) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw)
	for _, v := range verdicts {
		fmt.Fprintf(tw, "GPU %d	%s	%s\n", v.GPU, cell(v.Verdict), cell(orDash(v.Reason)))
	}
	return tw.Flush()
}

// Verdict is one GPU's health verdict (internal/health) in the JSON
// document: ok, warn, unknown or fail, and the line that says why.
type Verdict struct {
	GPU     int    `json:"gpu"`
	UUID    string `json:"uuid,omitempty"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

// NewVerdicts is the verdicts on s's selected GPUs, in GPU order; nil when
// no verdict is known (the health stage did not run).
func NewVerdicts(s *snapshot.Snapshot, f Filter) []Verdict {
	if s.Health == nil {
		return nil
	}
	var out []Verdict
	for _, g := range s.Health.GPUs {
		if f.keepGPU(g.GPU) {
			out = append(out, Verdict{GPU: g.GPU, UUID: g.UUID, Verdict: g.Status, Reason: g.Reason})
		}
	}
	slices.SortFunc(out, func(a, b Verdict) int { return a.GPU - b.GPU })
	return out
}

func gpuColumn(p *snapshot.Process) string {
	g := strconv.Itoa(p.GPU)
	if gi, ok := p.GPUInstanceID.Get(); ok {
		g += "/gi" + strconv.Itoa(gi)
		if ci, ok := p.ComputeInstanceID.Get(); ok {
			g += "/ci" + strconv.Itoa(ci)
		}
	}
	return g
}

func orDash(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return "-"
}

// compareOpt orders absent before present, then by value.
func compareOpt(a, b snapshot.Opt[int]) int {
	av, aok := a.Get()
	bv, bok := b.Get()
	switch {
	case aok != bok:
		if aok {
			return 1
		}
		return -1
	case !aok:
		return 0
	}
	return av - bv
}

// bytesColumn writes memory as the live page does (binary units, one
// decimal above bytes), so that a figure read in the terminal matches the
// page's; without the page's space, so that the column stays one field for
// awk and cut.
func bytesColumn(o snapshot.Opt[uint64]) string {
	v, ok := o.Get()
	if !ok {
		return "-"
	}
	return binaryBytes(v)
}

// binaryBytes mirrors bytes() in internal/webui/assets/app.js.
func binaryBytes(v uint64) string {
	units := [...]string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(v), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatUint(v, 10) + units[0]
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + units[i]
}

func percentColumn(o snapshot.Opt[float64]) string {
	v, ok := o.Get()
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v*100, 'f', 0, 64) + "%"
}

func containerColumn(c snapshot.Container) string {
	switch {
	case c.Name != "":
		return c.Name
	case c.ID != "":
		return shortID(c.ID)
	}
	return "-"
}

func podColumn(p snapshot.Pod) string {
	if p.Name == "" {
		if p.UID != "" {
			return "uid:" + p.UID
		}
		return "-"
	}
	s := p.Namespace + "/" + p.Name
	if p.Container != "" {
		s += "/" + p.Container
	}
	return s
}

func slurmColumn(j snapshot.SlurmJob) string {
	if j.JobID == "" {
		return "-"
	}
	// The partition has its own column: "alice@gpu" read as a user at a host.
	s := j.JobID
	if j.User != "" {
		s += " (" + j.User + ")"
	}
	return s
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// cell makes a value safe for a terminal table: control characters (a
// newline in a container name, an escape sequence in a command line) would
// break the columns or drive the terminal.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// Document is the JSON shape of `gpuwatch ps --output=json`. Absent readings
// are omitted, never reported as zero.
type Document struct {
	Time time.Time `json:"time"`
	// Clock is "wall", or "simulated" when Time is the simulator's clock
	// (the real time in the demo; 2026-01-01T00:00:00Z plus the elapsed
	// time when pinned), so that a reader knows where the time came from.
	Clock     string    `json:"clock"`
	Processes []Process `json:"processes"`
	// Allocations are the workloads holding the listed GPUs, busy or idle.
	Allocations []Allocation `json:"allocations"`
	// Health is the verdict on each listed GPU; absent when none is known.
	Health []Verdict `json:"health,omitempty"`
}

// Process is one GPU process in the JSON document.
type Process struct {
	GPU               int      `json:"gpu"`
	GPUUUID           string   `json:"gpu_uuid"`
	MIGUUID           string   `json:"mig_uuid,omitempty"`
	GPUInstanceID     *int     `json:"gpu_instance_id,omitempty"`
	ComputeInstanceID *int     `json:"compute_instance_id,omitempty"`
	PID               uint32   `json:"pid"`
	Type              string   `json:"type"`
	UsedMemoryBytes   *uint64  `json:"used_memory_bytes,omitempty"`
	SMUtilization     *float64 `json:"sm_utilization,omitempty"`
	MemoryUtilization *float64 `json:"memory_utilization,omitempty"`
	UID               string   `json:"uid,omitempty"`
	User              string   `json:"user,omitempty"`
	Command           string   `json:"command,omitempty"`

	Container *snapshot.Container `json:"container,omitempty"`
	Pod       *snapshot.Pod       `json:"pod,omitempty"`
	Slurm     *snapshot.SlurmJob  `json:"slurm,omitempty"`
}

// WriteJSON writes the processes as one indented JSON document.
func WriteJSON(w io.Writer, s *snapshot.Snapshot, f Filter) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(NewDocument(s, f))
}

// NewDocument is the JSON document of s's selected processes; the web UI's
// /api/v1/processes serves the same shape.
func NewDocument(s *snapshot.Snapshot, f Filter) Document {
	doc := Document{Time: s.Time.UTC(), Clock: "wall", Processes: []Process{}, Allocations: NewAllocations(s, f), Health: NewVerdicts(s, f)}
	if f.SimulatedClock {
		doc.Clock = "simulated"
	}
	for _, p := range selected(s, f) {
		out := Process{
			GPU: p.GPU, GPUUUID: p.GPUUUID, MIGUUID: p.MIGUUID, PID: p.PID, Type: p.Type,
			GPUInstanceID: ptr(p.GPUInstanceID), ComputeInstanceID: ptr(p.ComputeInstanceID),
			UsedMemoryBytes: ptr(p.UsedMemory), SMUtilization: ptr(p.SMUtilization), MemoryUtilization: ptr(p.MemoryUtilization),
			UID: p.Owner.UID, User: p.Owner.User, Command: p.Owner.Command,
		}
		if c := p.Owner.Container; c != (snapshot.Container{}) {
			out.Container = &c
		}
		if pod := p.Owner.Pod; pod != (snapshot.Pod{}) {
			out.Pod = &pod
		}
		if j := p.Owner.Slurm; j != (snapshot.SlurmJob{}) {
			out.Slurm = &j
		}
		doc.Processes = append(doc.Processes, out)
	}
	return doc
}

func ptr[T any](o snapshot.Opt[T]) *T {
	if v, ok := o.Get(); ok {
		return &v
	}
	return nil
}
