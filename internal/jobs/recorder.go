package jobs

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// CheckpointName is the running jobs' checkpoint in the accounting
// directory.
const CheckpointName = "running.json"

// DefaultCheckpointInterval is how often the running jobs' figures are
// written to disk: what a crash or SIGKILL can lose of a running job.
const DefaultCheckpointInterval = time.Minute

// Options configure a Recorder.
type Options struct {
	// Dir is the accounting directory (--accounting.dir).
	Dir string
	// Node names this node in the records (the host name).
	Node string
	// CheckpointInterval: see DefaultCheckpointInterval.
	CheckpointInterval time.Duration
	// JournalMaxBytes and JournalFiles bound the journal (see Journal).
	JournalMaxBytes int64
	JournalFiles    int
	Logger          *slog.Logger
}

// Recorder keeps the records of one node: it folds every accounting tick
// into the tracker, journals the jobs that ended and checkpoints the
// running ones. Safe for concurrent use.
type Recorder struct {
	opts    Options
	journal *Journal

	mu             sync.Mutex
	tracker        *Tracker
	lastCheckpoint time.Time
	// recorded are the Slurm jobs journaled in the last staleMark, by ID,
	// with when: an end mark that comes after its job's record was
	// written is removed at once.
	recorded map[string]time.Time
	// endMarks reads the epilogs' end marks (endmarks.go).
	endMarks endMarks
}

// checkpoint is the file CheckpointName.
type checkpoint struct {
	Version int       `json:"version"`
	Node    string    `json:"node"`
	Time    time.Time `json:"time"`
	Jobs    []*job    `json:"jobs"`
}

const checkpointVersion = 1

// Open opens the journal in opts.Dir and restores the running jobs of the
// last checkpoint. A checkpoint that cannot be read is an error naming
// it: starting without it would lose those jobs' figures silently.
func Open(opts Options) (*Recorder, error) {
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	j, err := OpenJournal(opts.Dir, opts.JournalMaxBytes, opts.JournalFiles)
	if err != nil {
		return nil, err
	}
	r := &Recorder{opts: opts, journal: j, tracker: NewTracker(opts.Node), recorded: map[string]time.Time{}, endMarks: endMarks{dir: opts.Dir}}
	// The epilog (root) writes its marks here; gpuwatch, owner of the
	// directory, removes them.
	if err := os.MkdirAll(filepath.Join(opts.Dir, EndedDir), 0o770); err != nil {
		_ = j.Close()
		return nil, err
	}
	jobs, err := readCheckpoint(filepath.Join(opts.Dir, CheckpointName))
	if err != nil {
		_ = j.Close()
		return nil, err
	}
	for _, jb := range jobs {
		r.tracker.jobs[jb.Key] = jb
	}
	if len(jobs) > 0 {
		opts.Logger.Info("restored running jobs from the checkpoint", "jobs", len(jobs))
	}
	return r, nil
}

func readCheckpoint(path string) ([]*job, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c checkpoint
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w (move it away to start without the running jobs' figures)", path, err)
	}
	if c.Version != checkpointVersion {
		return nil, fmt.Errorf("%s: version %d, this gpuwatch reads version %d", path, c.Version, checkpointVersion)
	}
	var out []*job
	for _, jb := range c.Jobs {
		if jb != nil && jb.Key != "" && (jb.Slurm != nil || jb.Pod != nil) {
			out = append(out, jb)
		}
	}
	return out, nil
}

// Observe folds one accounting tick into the records: s is the tick's
// enriched snapshot and acc the accountant's running totals after it.
// Jobs that ended are journaled (and synced) before Observe returns; the
// running ones are checkpointed every CheckpointInterval of snapshot time.
func (r *Recorder) Observe(s *snapshot.Snapshot, acc *snapshot.Accounting) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.tracker.ended = r.endMarks.read(now)
	ended := r.tracker.Observe(s, acc)
	for _, rec := range ended {
		if err := r.journal.Append(rec); err != nil {
			r.opts.Logger.Error("could not journal a job record", "job", rec.ID, "err", err)
			continue
		}
		if rec.Kind == KindSlurm {
			removeEndMark(r.opts.Dir, rec.ID)
			r.recorded[rec.ID] = now
		}
	}
	r.removeLateMarks(now)
	if r.lastCheckpoint.IsZero() {
		r.lastCheckpoint = s.Time
	}
	if len(ended) > 0 || s.Time.Sub(r.lastCheckpoint) >= r.opts.CheckpointInterval {
		if err := r.checkpointLocked(s.Time); err != nil {
			r.opts.Logger.Error("could not checkpoint the running jobs", "err", err)
		}
	}
}

// removeLateMarks removes the end marks of jobs already journaled and not
// running again: gpuwatch saw the job end before its epilog ran (a
// cancelled job leaves Slurm's list of running jobs at once), and the
// epilog, which waits for its mark to go, must not wait in vain.
func (r *Recorder) removeLateMarks(now time.Time) {
	for id, at := range r.recorded {
		if now.Sub(at) > staleMark {
			delete(r.recorded, id)
			continue
		}
		key := jobKey(id, "", "")
		if _, running := r.tracker.jobs[key]; r.tracker.ended[key] && !running {
			removeEndMark(r.opts.Dir, id)
		}
	}
}

// Checkpoint writes the running jobs' figures now.
func (r *Recorder) Checkpoint() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checkpointLocked(cmp.Or(r.tracker.prevTime, time.Now()))
}

func (r *Recorder) checkpointLocked(now time.Time) error {
	c := checkpoint{Version: checkpointVersion, Node: r.opts.Node, Time: now, Jobs: make([]*job, 0, len(r.tracker.jobs))}
	for _, jb := range r.tracker.jobs {
		c.Jobs = append(c.Jobs, jb)
	}
	slices.SortFunc(c.Jobs, func(a, b *job) int { return cmp.Compare(a.Key, b.Key) })
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := writeFileSynced(filepath.Join(r.opts.Dir, CheckpointName), data); err != nil {
		return err
	}
	r.lastCheckpoint = now
	return nil
}

// writeFileSynced replaces path with data atomically and durably: a
// temporary file, synced, renamed over path, and the directory synced.
func writeFileSynced(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, there is nothing left to remove
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Chmod(0o640); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// Running returns the records of the jobs running now.
func (r *Recorder) Running() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tracker.Running()
}

// Records returns the journal's records, oldest first, then the running
// jobs'.
func (r *Recorder) Records() ([]Record, error) {
	recs, _, err := ReadJournal(r.opts.Dir)
	if err != nil {
		return nil, err
	}
	return append(recs, r.Running()...), nil
}

// Close checkpoints the running jobs and closes the journal.
func (r *Recorder) Close() error {
	return errors.Join(r.Checkpoint(), r.journal.Close())
}

// ReadRunning reads the running jobs of the checkpoint in dir, as records
// (for `gpuwatch job` on a node whose gpuwatch it does not ask).
func ReadRunning(dir string) ([]Record, error) {
	path := filepath.Join(dir, CheckpointName)
	jobs, err := readCheckpoint(path)
	if err != nil {
		return nil, err
	}
	var node string
	if data, err := os.ReadFile(path); err == nil {
		var c checkpoint
		if json.Unmarshal(data, &c) == nil {
			node = c.Node
		}
	}
	out := make([]Record, 0, len(jobs))
	for _, jb := range jobs {
		out = append(out, jb.record(node, true))
	}
	return out, nil
}

// JournalGroups are the collector groups the accounting's reader reads
// beyond accounting.ReaderGroups when records are kept: memory (the GPU's
// size, for the notes), clock events (throttled time), XIDs, and GPM on
// every GPU that has it (the reader's GPMOnlyMIG off).
func JournalGroups() map[string]bool {
	return map[string]bool{snapshot.GroupMemory: true, snapshot.GroupClockEvents: true, snapshot.GroupXID: true, snapshot.GroupGPM: true}
}
