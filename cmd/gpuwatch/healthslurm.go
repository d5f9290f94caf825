package main

import (
	"context"
	"fmt"
	"io"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/health"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// healthSlurm is `gpuwatch health`'s Slurm action: drain this node when a
// GPU failed, resume it when gpuwatch drained it and every GPU is healthy
// again (docs/health.md, "Slurm"). It acts only when asked by its flags,
// whatever the backend: with --backend=sim too, so a test or a demo drains
// nothing unless it passes --slurm.drain.
type healthSlurm struct {
	drain, resume bool
}

func (h *healthSlurm) register(cmd *kingpin.CmdClause) {
	cmd.Flag("slurm.drain", "When a GPU or the node failed (exit 1), drain this Slurm node (--slurm.node-name) with the reason \"gpuwatch: GPU 3 XID 79 (…)\", unless it is DOWN or already drained for another reason. Runs --slurm.scontrol-path. Unknown health (exit 2) drains nothing.").
		BoolVar(&h.drain)
	cmd.Flag("slurm.resume", "When every GPU is fit again (exit 0), resume this Slurm node if gpuwatch drained it (its reason starts with \"gpuwatch:\"); a node drained for another reason, or DOWN, is left as it is.").
		BoolVar(&h.resume)
}

func (h *healthSlurm) asked() bool { return h.drain || h.resume }

// check refuses, before any GPU is read, a node name that is not one node.
func (h *healthSlurm) check(s *slurmFlags) error {
	if !h.asked() {
		return nil
	}
	if err := slurm.CheckNodeName(s.nodeName); err != nil {
		return fmt.Errorf("--slurm.node-name: %w", err)
	}
	return nil
}

// act drains or resumes the node for the report's verdict and says what it
// did on w. An error (scontrol failed, or its output could not be read)
// means nothing was changed, or the change was refused.
func (h *healthSlurm) act(r health.Report, s *slurmFlags, w io.Writer) error {
	if !h.asked() {
		return nil
	}
	verdict := slurm.VerdictUnknown
	switch r.ExitCode() {
	case health.ExitHealthy:
		verdict = slurm.VerdictHealthy
	case health.ExitUnhealthy:
		verdict = slurm.VerdictUnhealthy
	}
	gate := slurm.Gate{
		Control: slurm.NodeControl{Scontrol: s.scontrol, Format: s.format, Runner: slurm.ExecRunner{Timeout: s.timeout}},
		Drain:   h.drain, Resume: h.resume,
	}
	o, err := gate.Apply(context.Background(), s.nodeName, verdict, r.FailSummary())
	if err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	switch o.Action {
	case slurm.ActionDrain:
		_, err = fmt.Fprintf(w, "slurm: node %s drained (was %s): %s; reason %q\n", o.Node, o.Before, o.Why, o.Reason)
	case slurm.ActionResume:
		_, err = fmt.Fprintf(w, "slurm: node %s resumed (was %s): %s\n", o.Node, o.Before, o.Why)
	default:
		_, err = fmt.Fprintf(w, "slurm: node %s unchanged: %s\n", o.Node, o.Why)
	}
	return err
}
