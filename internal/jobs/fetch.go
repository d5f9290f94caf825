package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// Query is the job (or pod) `gpuwatch job` asks for: a Slurm job ID (or
// a pod's UID), or a pod as NAMESPACE/NAME.
type Query struct {
	ID  string
	Pod string
}

// Name is the job as the user gave it.
func (q Query) Name() string {
	if q.Pod != "" {
		return q.Pod
	}
	return q.ID
}

// Matches says whether a record is the one asked for.
func (q Query) Matches(r Record) bool {
	if q.Pod != "" {
		return MatchesPod(r, q.Pod)
	}
	return r.ID == q.ID
}

// FromLocal reads the job's records from this node's journal and running
// jobs' checkpoint in dir.
func FromLocal(dir string, q Query) ([]Record, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("--accounting.dir: %w (is gpuwatch serve keeping records here? or use --job.node-url)", err)
	}
	all, _, err := ReadJournal(dir)
	if err != nil {
		return nil, err
	}
	running, err := ReadRunning(dir)
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, r := range append(all, running...) {
		if q.Matches(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// FromPrometheusCounters reads the job from the accounting counters in
// Prometheus (api) over lookback before now, and names its records after q.
func FromPrometheusCounters(ctx context.Context, api Querier, q Query, lookback time.Duration, now time.Time) ([]Record, error) {
	recs, err := FromPrometheus(ctx, api, PrometheusMatch(q.ID, q.Pod), lookback, now)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		r := &recs[i]
		if q.Pod != "" {
			ns, name, _ := strings.Cut(q.Pod, "/")
			r.Kind, r.ID, r.Pod = KindPod, q.Pod, &PodIdentity{Namespace: ns, Name: name}
		} else {
			r.Kind, r.ID, r.Slurm = KindSlurm, q.ID, &SlurmIdentity{JobID: q.ID}
		}
	}
	for _, r := range recs {
		if err := r.Check(); err != nil {
			return nil, fmt.Errorf("the accounting counters in Prometheus for %s: %w", q.Name(), err)
		}
	}
	return recs, nil
}

// SlurmJobNodes is a Slurm job's node list, from scontrol.
func SlurmJobNodes(ctx context.Context, run slurm.CommandRunner, scontrol, id string) ([]string, error) {
	out, err := run.Run(ctx, scontrol, "show", "job", "-d", "-o", id)
	if err != nil {
		return nil, fmt.Errorf("the job's nodes (give --job.nodes once Slurm has forgotten the job): %w", err)
	}
	js, err := slurm.ParseScontrolJobs(out)
	if err != nil {
		return nil, err
	}
	for _, j := range js {
		if j.ID == id && len(j.Nodes) > 0 {
			return j.Nodes, nil
		}
	}
	return nil, errors.New("scontrol show job " + id + " lists no nodes (give --job.nodes)")
}
