package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/accounting"
	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/jobs"
)

// defaultAccountingDir is where the job journal and the checkpoint live;
// the systemd unit (StateDirectory=gpuwatch), the packages and the Helm
// chart create it.
const defaultAccountingDir = "/var/lib/gpuwatch"

// journalFlags configure the per-job records (docs/jobs.md).
type journalFlags struct {
	records    bool
	dir        string
	dirSet     bool
	epilogDir  string
	checkpoint time.Duration
	maxBytes   int64
	files      int
}

func (j *journalFlags) register(app *kingpin.Application) {
	app.Flag("accounting.records", "Write a record of every Slurm job and Kubernetes pod that used a GPU when it ends, to the journal in --accounting.dir (served at /api/v1/jobs, read by `gpuwatch job`). On with --backend=nvml; with the simulator only when --accounting.dir is given.").
		Default("true").BoolVar(&j.records)
	app.Flag("accounting.dir", "Directory of the job journal ("+jobs.JournalName+", rotated to .1, .2, ...) and of the running jobs' checkpoint ("+jobs.CheckpointName+"). `gpuwatch job` reads it on the node.").
		Default(defaultAccountingDir).IsSetByUser(&j.dirSet).StringVar(&j.dir)
	app.Flag("accounting.epilog-dir", "Directory where the Slurm node epilog (deploy/slurm/gpuwatch-epilog.sh, run as root) marks jobs ended, so their records are written at once; gpuwatch only reads it and answers in --accounting.dir/"+jobs.DoneDir+". Root's own directory: root never writes where gpuwatch's user could plant a link. Set GPUWATCH_EPILOG_DIR to the same for the epilog.").
		Default(jobs.DefaultEpilogDir).StringVar(&j.epilogDir)
	app.Flag("accounting.checkpoint-interval", "How often the running jobs' figures are written to --accounting.dir: what a crash or SIGKILL can lose of a running job (a finished job's record is synced when it is written).").
		Default(jobs.DefaultCheckpointInterval.String()).DurationVar(&j.checkpoint)
	app.Flag("accounting.journal-max-bytes", "Size at which the job journal is rotated.").
		Default(fmt.Sprint(jobs.DefaultJournalMaxBytes)).Int64Var(&j.maxBytes)
	app.Flag("accounting.journal-files", "How many journal files are kept, the current one included: the journal never exceeds this × --accounting.journal-max-bytes.").
		Default(fmt.Sprint(jobs.DefaultJournalFiles)).IntVar(&j.files)
}

// keepsRecords says whether this run keeps job records: serve on real
// GPUs, or any long-running command given a directory (a simulated
// fleet's records are not accounting, and a textfile writer beside serve
// must not share serve's journal).
func (f *commonFlags) keepsRecords() bool {
	serve := f.command == "" || f.command == "serve"
	return f.journal.records && ((serve && f.backend == "nvml") || f.journal.dirSet)
}

// serveRecordsDir is --accounting.dir when serve would keep records with
// these flags (keepsRecords, for serve), else "".
func (f *commonFlags) serveRecordsDir() string {
	if f.journal.records && (f.backend == "nvml" || f.journal.dirSet) {
		return f.journal.dir
	}
	return ""
}

// startJournal opens the journal and has the accountant's ticker feed it.
// It adds the journal's closer last: it runs after the ticker stopped.
func (f *commonFlags) startJournal(logger *slog.Logger, st *stack, acct *accounting.Accountant) error {
	j := f.journal
	switch {
	case j.checkpoint < time.Second:
		return fmt.Errorf("--accounting.checkpoint-interval=%s: must be at least 1s", j.checkpoint)
	case j.maxBytes < 4096:
		return fmt.Errorf("--accounting.journal-max-bytes=%d: must be at least 4096", j.maxBytes)
	case j.files < 1:
		return fmt.Errorf("--accounting.journal-files=%d: must be at least 1", j.files)
	}
	node, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("--accounting.records: the host name: %w", err)
	}
	rec, err := jobs.Open(jobs.Options{
		Dir: j.dir, EpilogDir: j.epilogDir, Node: node, CheckpointInterval: j.checkpoint,
		JournalMaxBytes: j.maxBytes, JournalFiles: j.files, Logger: logger,
	})
	if err != nil && !j.dirSet {
		// The default directory is missing or read-only (gpuwatch run by
		// hand, or a unit without StateDirectory=): the counters and
		// metrics go on; only the records are off.
		logger.Warn("job records are off: the default --accounting.dir cannot be used; name a writable one, or --no-accounting.records", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("--accounting.dir=%s: %w (or --no-accounting.records)", j.dir, err)
	}
	acct.AfterTick(rec.Observe)
	st.jobs = rec
	st.extra = append(st.extra, rec)
	st.closers = append(st.closers, func() {
		if err := rec.Close(); err != nil {
			logger.Error("closing the job journal", "err", err)
		}
	})
	return nil
}

// journalCatalog lists the records' own metrics for `gpuwatch metrics`.
func journalCatalog() []exporter.Metric {
	out := make([]exporter.Metric, 0, len(jobs.Metrics))
	for _, m := range jobs.Metrics {
		out = append(out, exporter.Metric{
			Name: m.Name, Type: m.Type, Unit: unitOf(m.Name), Help: m.Help,
			Source: "gpuwatch (the job journal in --accounting.dir)", Collector: "accounting.records", Default: true,
		})
	}
	return out
}
