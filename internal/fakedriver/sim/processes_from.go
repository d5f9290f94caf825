//go:build cgo

package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// Processes that come and go at run time (Config.ProcessesFrom).
//
// A test that runs real workloads (a Slurm job, a container) makes the
// simulator report the workload's real PIDs as GPU processes, so that the
// unmodified attribution (procfs, cgroup, Slurm, runtimes) finds their
// owners. The file is re-read whenever it changes, at the next process
// query, so each collection sees its current content; an entry whose
// process has exited is no longer reported, as the driver forgets a
// process when it exits. An entry without a start has utilization samples
// only from when the file first named its PID: the driver has none of a
// process from before it opened the GPU, and samples invented for the
// seconds before the workload wrote the file would count as its use. These processes do not change the device's load
// (utilization, power, energy, clocks, GPM stay those of the profile or
// `processes`), so that every counter stays a pure function of time.

// processesFromFile is the shape of a processes_from file: the same
// entries as the config's `processes`, under the same key, so that the
// file can grow other keys later.
type processesFromFile struct {
	Processes []ProcessSpec `yaml:"processes"`
}

// liveProcesses holds what was last read from the processes_from file.
type liveProcesses struct {
	path string

	mu      sync.Mutex
	version fileVersion    // of the content placed below
	placed  [][]simProcess // by device: the config's processes, then the file's
	err     error          // why the file's current content was refused; nil when placed is current
	// firstNamed is when the file first named each PID (elapsed time), the
	// start of an entry that gives none; kept across rewrites of the file.
	firstNamed map[uint32]time.Duration
}

// fileVersion tells whether a file changed since it was last read.
type fileVersion struct {
	exists bool
	ino    uint64
	size   int64
	mtime  time.Time
}

func statVersion(path string) (fileVersion, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileVersion{}, nil
	}
	if err != nil {
		return fileVersion{}, err
	}
	v := fileVersion{exists: true, size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		v.ino = st.Ino
	}
	return v, nil
}

// loadProcessesFrom reads a processes_from file; a file that does not
// exist holds no processes (a workload creates it when it starts).
func loadProcessesFrom(path string) ([]ProcessSpec, error) {
	data, err := configfile.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sim processes_from: %w", err)
	}
	var f processesFromFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %s", path, yamlErrorText(err))
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err == nil && len(root.Content) == 1 {
		cfg := Config{Processes: f.Processes}
		recordLines(root.Content[0], &cfg)
	}
	return f.Processes, nil
}

// startProcessesFrom reads the file once (a bad file is an error at start)
// and keeps it for procs.
func (s *Sim) startProcessesFrom(path string) error {
	l := &liveProcesses{path: path, firstNamed: map[uint32]time.Duration{}}
	s.live = l
	static := s.staticProcesses()
	version, err := statVersion(path)
	if err != nil {
		return fmt.Errorf("sim processes_from: %w", err)
	}
	placed, err := s.readLive(path, static, l.firstNamed)
	if err != nil {
		return err
	}
	l.version, l.placed = version, placed
	return nil
}

// readLive reads and places the file's processes after static's. An
// entry without a start has utilization samples from when the file first
// named its PID (firstNamed, updated here); it is listed at once.
func (s *Sim) readLive(path string, static [][]simProcess, firstNamed map[uint32]time.Duration) ([][]simProcess, error) {
	specs, err := loadProcessesFrom(path)
	if err != nil {
		return nil, err
	}
	cfg := Config{source: path, Processes: specs}
	if err := cfg.validateShape(); err != nil {
		return nil, err
	}
	placed, err := s.place(&cfg, "processes", specs, static)
	if err != nil {
		return nil, err
	}
	unstarted := map[uint32]bool{}
	for _, spec := range specs {
		if spec.Start == nil {
			unstarted[spec.PID] = true
		}
	}
	now := s.elapsed()
	for dev := range placed {
		for i := len(static[dev]); i < len(placed[dev]); i++ {
			p := &placed[dev][i]
			if !unstarted[p.pid] {
				continue
			}
			at, seen := firstNamed[p.pid]
			if !seen {
				at = now
				firstNamed[p.pid] = at
			}
			p.sampledFrom = at
		}
	}
	return placed, nil
}

func (s *Sim) staticProcesses() [][]simProcess {
	out := make([][]simProcess, len(s.devices))
	for i, d := range s.devices {
		out[i] = d.processes
	}
	return out
}

// refresh re-reads the file when it changed. A file that cannot be read
// or placed keeps the last good content (a writer that does not rename
// may be caught half-way) and is retried at the next change.
func (l *liveProcesses) refresh(s *Sim) [][]simProcess {
	l.mu.Lock()
	defer l.mu.Unlock()
	version, err := statVersion(l.path)
	if err != nil || version == l.version {
		return l.placed
	}
	placed, err := s.readLive(l.path, s.staticProcesses(), l.firstNamed)
	l.version = version
	if err != nil {
		l.err = err
		return l.placed
	}
	l.placed, l.err = placed, nil
	return l.placed
}

// ProcessesFromError is why the processes_from file's current content was
// refused (the last good content is still reported), or nil.
func (s *Sim) ProcessesFromError() error {
	if s.live == nil {
		return nil
	}
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	return s.live.err
}

// procs is the device's processes now: the configured ones and, with
// processes_from, the file's whose process still runs.
func (d *device) procs() []simProcess {
	l := d.sim.live
	if l == nil {
		return d.processes
	}
	all := l.refresh(d.sim)[d.index]
	out := make([]simProcess, 0, len(all))
	out = append(out, d.processes...)
	for _, p := range all[len(d.processes):] {
		if processExists(p.pid) {
			out = append(out, p)
		}
	}
	return out
}

// processExists tells whether a process with this PID runs (or is a
// zombie not yet reaped); EPERM means it exists but belongs to another user.
func processExists(pid uint32) bool {
	err := syscall.Kill(int(pid), 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
