package jobs

import (
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// DefaultCheckpointInterval is how often the running jobs' figures are
// written to disk: what a crash or SIGKILL can lose of a running job.
const DefaultCheckpointInterval = time.Minute

// Options configure a Recorder.
type Options struct {
	// Dir is the accounting directory (--accounting.dir).
	Dir string
	// EpilogDir is the Slurm epilog's directory of end marks
	// (--accounting.epilog-dir): DefaultEpilogDir when empty.
	EpilogDir string
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
//
// A record that could not be journaled (a full disk, an obstacle to
// rotation) stays pending: in memory and in the checkpoint, retried at
// every tick in the order the jobs ended, until it is written.
type Recorder struct {
	opts    Options
	journal *Journal

	mu             sync.Mutex
	tracker        *Tracker
	lastCheckpoint time.Time
	// pending are the records not journaled yet, oldest first.
	pending []Record
	// endMarks reads the epilogs' end marks, answers writes gpuwatch's
	// answers to them (endmarks.go).
	endMarks endMarks
	answers  answers
	// health is what went wrong writing, for the metrics and the log.
	health recorderHealth
}

// Open opens the journal in opts.Dir and restores the running jobs and
// the pending records of the last checkpoint. A checkpoint that cannot be
// read is moved aside (CheckpointName.corrupt-TIME) and logged: what of it
// can be read is restored, each job marked Partial, and serving goes on.
// A restored record or job the journal already holds (a crash came between
// the journal's write and the checkpoint's) is not written again.
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
	for _, err := range j.RemoveExtraFiles() {
		opts.Logger.Warn("a rotated journal file beyond --accounting.journal-files could not be removed; move it away", "err", err)
	}
	if opts.EpilogDir == "" {
		opts.EpilogDir = DefaultEpilogDir
	}
	r := &Recorder{opts: opts, journal: j, tracker: NewTracker(opts.Node), endMarks: endMarks{dir: opts.EpilogDir}, answers: answers{d: j.dir}}
	if err := r.answers.prepare(); err != nil {
		_ = j.Close()
		return nil, err
	}
	c, corrupt, err := loadCheckpoint(j.dir, opts.Logger)
	if err != nil {
		_ = j.Close()
		return nil, err
	}
	if corrupt {
		r.health.corruptCheckpoints++
	}
	if err := r.restore(c); err != nil {
		_ = j.Close()
		return nil, err
	}
	return r, nil
}

// restore takes the checkpoint's running jobs and pending records, less
// those the journal already holds.
func (r *Recorder) restore(c *checkpoint) error {
	if c == nil || (len(c.Jobs) == 0 && len(c.Pending) == 0) {
		return nil
	}
	want := map[RecordIdentity]bool{}
	for _, jb := range c.Jobs {
		want[jb.record(r.opts.Node, false).Identity()] = true
	}
	for i := range c.Pending {
		want[c.Pending[i].Identity()] = true
	}
	held, err := journalHolds(r.opts.Dir, want)
	if err != nil {
		return err
	}
	var dropped int
	for _, jb := range c.Jobs {
		if held[jb.record(r.opts.Node, false).Identity()] {
			dropped++
			continue
		}
		r.tracker.jobs[jb.Key] = jb
	}
	for _, rec := range c.Pending {
		if held[rec.Identity()] {
			dropped++
			continue
		}
		r.pending = append(r.pending, rec)
	}
	r.opts.Logger.Info("restored from the checkpoint", "running_jobs", len(r.tracker.jobs), "pending_records", len(r.pending), "already_journaled", dropped)
	return nil
}

// journalHolds says which of want the journal in dir holds.
func journalHolds(dir string, want map[RecordIdentity]bool) (map[RecordIdentity]bool, error) {
	read, err := ReadJournalReport(dir)
	if err != nil {
		return nil, err
	}
	held := map[RecordIdentity]bool{}
	for i := range read.Records {
		if id := read.Records[i].Identity(); want[id] {
			held[id] = true
		}
	}
	return held, nil
}

// Observe folds one accounting tick into the records: s is the tick's
// enriched snapshot and acc the accountant's running totals after it.
// Jobs that ended are journaled (and synced) before Observe returns, with
// the records still pending from earlier ticks; the running ones are
// checkpointed every CheckpointInterval of snapshot time, and at once
// while records are pending.
func (r *Recorder) Observe(s *snapshot.Snapshot, acc *snapshot.Accounting) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.tracker.ended = r.endMarks.read(now)
	before := len(r.tracker.jobs)
	ended := r.tracker.Observe(s, acc)
	// A job that started is checkpointed at once, so that `gpuwatch job`
	// on the node (which reads the checkpoint) shows it from its first
	// tick, not a checkpoint interval later.
	started := len(r.tracker.jobs)+len(ended) > before
	hadPending := len(r.pending) > 0
	if len(ended) > 0 {
		crashPoint("ended")
	}
	r.pending = append(r.pending, ended...)
	r.flushPending(now)
	r.answerMarks(now)
	if r.lastCheckpoint.IsZero() {
		r.lastCheckpoint = s.Time
	}
	if started || len(ended) > 0 || hadPending || len(r.pending) > 0 || s.Time.Sub(r.lastCheckpoint) >= r.opts.CheckpointInterval {
		r.health.checkpointed(r.opts.Logger, r.checkpointLocked(s.Time))
	}
}

// flushPending journals the pending records in order, up to the first
// that fails.
func (r *Recorder) flushPending(now time.Time) {
	written := 0
	var err error
	for _, rec := range r.pending {
		if err = r.journal.Append(rec); err != nil {
			break
		}
		crashPoint("journaled")
		written++
	}
	r.pending = slices.Delete(r.pending, 0, written)
	r.health.journaled(r.opts.Logger, err, written, len(r.pending), r.journal.Stats().RotateErr)
}

// answerMarks tells the epilog of each marked job that is not running
// here that it need not wait: its record was written (or is pending, and
// served), or it never had a GPU on this node.
func (r *Recorder) answerMarks(now time.Time) {
	for key := range r.tracker.ended {
		if _, running := r.tracker.jobs[key]; running {
			continue
		}
		if err := r.answers.done(strings.TrimPrefix(key, "slurm/"), now); err != nil {
			r.opts.Logger.Debug("could not answer the epilog", "job", key, "err", err)
		}
	}
	r.answers.sweep(now)
}

// Checkpoint writes the running jobs' figures now.
func (r *Recorder) Checkpoint() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checkpointLocked(cmp.Or(r.tracker.prevTime, time.Now()))
}

func (r *Recorder) checkpointLocked(now time.Time) error {
	c := checkpoint{Version: checkpointVersion, Node: r.opts.Node, Time: now, Jobs: make([]*job, 0, len(r.tracker.jobs)), Pending: r.pending}
	for _, jb := range r.tracker.jobs {
		c.Jobs = append(c.Jobs, jb)
	}
	slices.SortFunc(c.Jobs, func(a, b *job) int { return cmp.Compare(a.Key, b.Key) })
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := r.journal.dir.writeFile(CheckpointName, data); err != nil {
		return err
	}
	crashPoint("checkpointed")
	r.lastCheckpoint = now
	return nil
}

// Running returns the records of the jobs running now.
func (r *Recorder) Running() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tracker.Running()
}

// Unjournaled returns the records the journal does not hold: the ended
// jobs' records still pending (see Recorder), oldest first, then the
// running jobs', ordered by ID.
func (r *Recorder) Unjournaled() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(slices.Clone(r.pending), r.tracker.Running()...)
}

// Close checkpoints the running jobs and closes the journal.
func (r *Recorder) Close() error {
	return errors.Join(r.Checkpoint(), r.journal.Close())
}

// JournalGroups are the collector groups the accounting's reader reads
// beyond accounting.ReaderGroups when records are kept: memory (the GPU's
// size, for the notes), clock events (throttled time), XIDs, and GPM on
// every GPU that has it (the reader's GPMOnlyMIG off).
func JournalGroups() map[string]bool {
	return map[string]bool{snapshot.GroupMemory: true, snapshot.GroupClockEvents: true, snapshot.GroupXID: true, snapshot.GroupGPM: true}
}
