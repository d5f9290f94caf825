package smibackend

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/validate"
)

// Options configure a Reader.
type Options struct {
	// Command is the argv run in place of nvidia-smi, the query's
	// arguments appended: {"ssh", "-o", "BatchMode=yes", "gpu-box",
	// "nvidia-smi"}. Empty: nvidia-smi, found on the PATH (on Windows, in
	// its standard install location too).
	Command []string
	// Host names the host the command reads, for the driver's library
	// label ("nvidia-smi on gpu-box"); empty for this host.
	Host string
	// Groups are the enabled collector groups; a disabled group asks
	// nvidia-smi for none of its fields.
	Groups map[string]bool
	Logger *slog.Logger
}

// Reader reads GPUs by running nvidia-smi. It is safe for concurrent use;
// concurrent reads run nvidia-smi once each.
type Reader struct {
	run       runner
	groups    map[string]bool
	logger    *slog.Logger
	library   string
	processes bool

	mu sync.Mutex
	// q is the query this driver answers, nil until discovered.
	q      *query
	limits []snapshot.DriverLimit
	// known are the GPUs of the last successful read, reported down
	// (not dropped) while nvidia-smi does not answer.
	known   []snapshot.Device
	failing bool
	dropped map[string]uint64
}

// New prepares a reader. It runs nothing: the field list is discovered by
// the first read, so that a remote host that is down at start is retried.
// A local nvidia-smi that is not installed is an error now.
func New(opts Options) (*Reader, error) {
	argv := opts.Command
	if len(argv) == 0 {
		path, err := findNvidiaSMI()
		if err != nil {
			return nil, err
		}
		argv = []string{path}
	} else if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, fmt.Errorf("--nvidia-smi.command: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	library := "nvidia-smi"
	if opts.Host != "" {
		library += " on " + opts.Host
	}
	return &Reader{
		run: runner{argv: argv}, groups: opts.Groups, logger: logger, library: library,
		processes: opts.Groups[snapshot.GroupProcesses], dropped: map[string]uint64{},
	}, nil
}

// Close releases nothing: no run outlives its read.
func (r *Reader) Close() error { return nil }

// Read runs nvidia-smi once for the GPUs and, with the processes
// collector on, once (at the same time) for their processes.
func (r *Reader) Read(ctx context.Context) (*snapshot.Snapshot, error) {
	start := time.Now()
	q, err := r.discover(ctx)
	if err != nil {
		return r.failed(start, err)
	}
	var procOut []byte
	var procErr error
	var wg sync.WaitGroup
	if r.processes {
		wg.Go(func() {
			procOut, procErr = r.run.run(ctx, "--query-compute-apps="+strings.Join(processFields, ","), "--format=csv,noheader,nounits")
		})
	}
	out, err := r.run.run(ctx, "--query-gpu="+strings.Join(q.names, ","), "--format=csv,noheader,nounits")
	wg.Wait()
	t := parseGPUs(out, *q)
	if err != nil && len(t.devices) == 0 {
		if strings.Contains(err.Error(), "is not a valid field") {
			r.forget() // the driver changed under us: ask again
		}
		return r.failed(start, err)
	}
	snap := r.assemble(start, t, err)
	if r.processes {
		r.addProcesses(snap, procOut, procErr)
	}
	r.countDropped(snap)
	return snap, nil
}

// discover learns, once, which fields the driver's nvidia-smi knows.
func (r *Reader) discover(ctx context.Context) (*query, error) {
	r.mu.Lock()
	q := r.q
	r.mu.Unlock()
	if q != nil {
		return q, nil
	}
	out, err := r.run.run(ctx, "--help-query-gpu")
	if err != nil {
		return nil, err
	}
	planned, err := plan(parseHelp(out), r.groups)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.q, r.limits = &planned, limits(planned, r.groups)
	return r.q, nil
}

func (r *Reader) forget() {
	r.mu.Lock()
	r.q = nil
	r.mu.Unlock()
}

// failed is a read in which nvidia-smi gave no GPU. The GPUs seen before
// are down, with the run's error as every group's; before any was seen,
// the read fails.
func (r *Reader) failed(start time.Time, err error) (*snapshot.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.failing {
		r.logger.Warn("nvidia-smi gave no reading; its GPUs are reported down until it answers", "err", err)
		r.failing = true
	}
	if len(r.known) == 0 {
		return nil, err
	}
	snap := &snapshot.Snapshot{Time: start, Driver: snapshot.Driver{Library: r.library, Limits: r.limits}, Groups: map[string]snapshot.GroupStatus{}}
	for _, k := range r.known {
		snap.Devices = append(snap.Devices, snapshot.Device{Index: k.Index, UUID: k.UUID, DownReason: "nvidia_smi_failed"})
	}
	for g, on := range r.groups {
		if on {
			snap.Groups[g] = snapshot.GroupStatus{Duration: time.Since(start), Err: err}
		}
	}
	return snap, nil
}

// assemble turns a parsed run into a snapshot: every field problem lands
// in its group's status or the dropped counts, impossible values are
// dropped, and the GPUs are remembered.
func (r *Reader) assemble(start time.Time, t table, runErr error) *snapshot.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing {
		r.logger.Info("nvidia-smi answers again", "gpus", len(t.devices))
		r.failing = false
	}
	took := time.Since(start)
	snap := &snapshot.Snapshot{Time: start, DriverVersion: t.driver, Devices: t.devices, Groups: map[string]snapshot.GroupStatus{},
		Driver: snapshot.Driver{Version: t.driver, Branch: branch(t.driver), Library: r.library, Limits: r.limits}}
	for g, on := range r.groups {
		if on {
			snap.Groups[g] = snapshot.GroupStatus{Duration: took, Err: runErr}
		}
	}
	fail := func(group string, err error) {
		if st := snap.Groups[group]; st.Err == nil && r.groups[group] {
			st.Err = err
			snap.Groups[group] = st
		}
	}
	for _, p := range t.problems {
		switch p.state {
		case Garbage:
			r.dropped[p.name]++
			fail(p.group, p)
		case ReadError:
			fail(p.group, p)
		}
	}
	if t.garbageRows > 0 {
		r.dropped["nvidia_smi_row"] += uint64(t.garbageRows)
		fail(snapshot.GroupInfo, fmt.Errorf("nvidia-smi printed %d line(s) that are no GPU's row", t.garbageRows))
	}
	r.identify(snap.Devices)
	for i := range snap.Devices {
		d := &snap.Devices[i]
		if !d.Up {
			continue
		}
		d.ReadingAge = took
		// nvidia-smi has no energy counter to carry over a reset.
		validate.Device(d, nil, func(field string) { r.dropped[field]++ })
	}
	return snap
}

// countDropped hands the snapshot the dropped readings counted so far.
func (r *Reader) countDropped(snap *snapshot.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.dropped) > 0 {
		snap.ReadingsDropped = make(map[string]uint64, len(r.dropped))
		maps.Copy(snap.ReadingsDropped, r.dropped)
	}
}

// identify gives a GPU that nvidia-smi could not reach the UUID it had
// when last seen (matched by PCI bus ID, else by index), and remembers the
// GPUs of this read.
func (r *Reader) identify(devices []snapshot.Device) {
	for i := range devices {
		d := &devices[i]
		if d.UUID != "" {
			continue
		}
		for _, k := range r.known {
			if (d.Info.PCIBusID != "" && sameBus(k.Info.PCIBusID, d.Info.PCIBusID)) || (d.Info.PCIBusID == "" && k.Index == d.Index) {
				d.Index, d.UUID = k.Index, k.UUID
			}
		}
		d.Info = snapshot.Info{}
	}
	r.known = r.known[:0]
	for _, d := range devices {
		r.known = append(r.known, snapshot.Device{Index: d.Index, UUID: d.UUID, Info: snapshot.Info{PCIBusID: d.Info.PCIBusID}})
	}
}

// addProcesses fills in the processes of the GPUs read. When the process
// run failed, each GPU's processes are unknown, their count absent.
func (r *Reader) addProcesses(snap *snapshot.Snapshot, out []byte, err error) {
	if err != nil {
		for i := range snap.Devices {
			snap.Devices[i].ProcessesUnknown = "nvidia_smi_failed"
		}
		if st := snap.Groups[snapshot.GroupProcesses]; st.Err == nil {
			st.Err = err
			snap.Groups[snapshot.GroupProcesses] = st
		}
		return
	}
	procs, garbage := parseProcesses(out, snap.Devices)
	if garbage > 0 {
		r.mu.Lock()
		r.dropped["nvidia_smi_process_row"] += uint64(garbage)
		r.mu.Unlock()
	}
	for _, d := range snap.Devices {
		if !d.Up {
			continue
		}
		var mine []snapshot.Process
		for _, p := range procs {
			if p.GPU == d.Index {
				mine = append(mine, p)
			}
		}
		validate.Processes(mine, d.Memory.Total, func(field string) {
			r.mu.Lock()
			r.dropped[field]++
			r.mu.Unlock()
		})
		snap.Processes = append(snap.Processes, mine...)
	}
}

// sameBus compares PCI bus IDs as nvidia-smi writes them: with an 8-digit
// domain in pci.bus_id ("00000000:2A:00.0") and a 4-digit one in its
// messages ("0000:2A:00.0").
func sameBus(a, b string) bool {
	trim := func(id string) string {
		domain, rest, _ := strings.Cut(strings.ToLower(id), ":")
		return strings.TrimLeft(domain, "0") + ":" + rest
	}
	return trim(a) == trim(b)
}

// branch names the driver branch of a version: "550.90.07" is R550.
func branch(version string) string {
	major, _, ok := strings.Cut(version, ".")
	if !ok || major == "" {
		return ""
	}
	return "R" + major
}
