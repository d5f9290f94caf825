package jobs

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// recorderHealth is what went wrong writing the records. The log says
// when a state changes (a write starts or stops failing), not at every
// tick; the metrics say how it stands.
type recorderHealth struct {
	journalFailing     bool
	checkpointFailing  bool
	checkpointErrors   uint64
	corruptCheckpoints uint64
}

// journaled notes a flush of the pending records: written of them went,
// err stopped the rest (left still pending), rotateErr is the journal's
// rotation state.
func (h *recorderHealth) journaled(logger *slog.Logger, err error, written, left int, rotateErr error) {
	switch {
	case err != nil && !h.journalFailing:
		h.journalFailing = true
		logger.Error("could not write job records to the journal: they are kept (in memory and the checkpoint) and retried at every tick; free space in --accounting.dir or fix what the error names",
			"err", err, "pending_records", left)
	case err != nil:
		logger.Debug("job records still pending", "err", err, "pending_records", left)
	case h.journalFailing:
		h.journalFailing = false
		logger.Info("the journal takes records again: the pending ones were written", "records", written)
	}
	if rotateErr != nil && err == nil && written > 0 {
		logger.Warn("the journal could not be rotated; records go on the current file (up to twice --accounting.journal-max-bytes) and rotation is retried", "err", rotateErr)
	}
}

// checkpointed notes a checkpoint's outcome.
func (h *recorderHealth) checkpointed(logger *slog.Logger, err error) {
	switch {
	case err != nil:
		h.checkpointErrors++
		if !h.checkpointFailing {
			h.checkpointFailing = true
			logger.Error("could not checkpoint the running jobs: retried at every tick; a crash now loses their figures since the last checkpoint", "err", err)
		} else {
			logger.Debug("checkpoint still failing", "err", err)
		}
	case h.checkpointFailing:
		h.checkpointFailing = false
		logger.Info("the running jobs are checkpointed again")
	}
}

// MetricSpec documents one of the records' own metrics (for `gpuwatch
// metrics` and docs/metrics.md).
type MetricSpec struct {
	Name, Type, Help string
}

// Metrics are the records' own metrics, served with the exporter's while
// records are kept.
var Metrics = []MetricSpec{
	{"gpuwatch_journal_write_errors_total", "counter", "Job journal appends and rotations that failed since gpuwatch started (records that failed stay pending and are retried)."},
	{"gpuwatch_journal_pending_records", "gauge", "Records of ended jobs not yet written to the job journal (kept in memory and in the checkpoint, retried every accounting tick)."},
	{"gpuwatch_journal_last_write_timestamp_seconds", "gauge", "When a record was last written to the job journal and synced (Unix time); absent until one is."},
	{"gpuwatch_journal_rotation_failing", "gauge", "1 while the job journal's last rotation failed (an obstacle in --accounting.dir), else 0."},
	{"gpuwatch_journal_checkpoint_errors_total", "counter", "Checkpoints of the running jobs that could not be written since gpuwatch started."},
	{"gpuwatch_journal_checkpoints_corrupt_total", "counter", "Checkpoints found unreadable at start and moved aside (running.json.corrupt-TIME) since gpuwatch started."},
}

var descs = func() []*prometheus.Desc {
	out := make([]*prometheus.Desc, len(Metrics))
	for i, m := range Metrics {
		out[i] = prometheus.NewDesc(m.Name, m.Help, nil, nil)
	}
	return out
}()

var (
	descWriteErrors      = descs[0]
	descPending          = descs[1]
	descLastWrite        = descs[2]
	descRotationFailing  = descs[3]
	descCheckpointErrors = descs[4]
	descCorrupt          = descs[5]
)

// Describe implements prometheus.Collector.
func (r *Recorder) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the health of the records'
// writes.
func (r *Recorder) Collect(ch chan<- prometheus.Metric) {
	st := r.journal.Stats()
	r.mu.Lock()
	pending, h := len(r.pending), r.health
	r.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descWriteErrors, prometheus.CounterValue, float64(st.WriteErrors))
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(pending))
	if !st.LastWrite.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLastWrite, prometheus.GaugeValue, float64(st.LastWrite.UnixNano())/float64(time.Second))
	}
	failing := 0.0
	if st.RotateErr != nil {
		failing = 1
	}
	ch <- prometheus.MustNewConstMetric(descRotationFailing, prometheus.GaugeValue, failing)
	ch <- prometheus.MustNewConstMetric(descCheckpointErrors, prometheus.CounterValue, float64(h.checkpointErrors))
	ch <- prometheus.MustNewConstMetric(descCorrupt, prometheus.CounterValue, float64(h.corruptCheckpoints))
}
