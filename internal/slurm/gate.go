package slurm

import (
	"context"
	"fmt"
)

// Verdict is a node's health as the gate acts on it.
type Verdict int

// Verdicts: Unknown never leads to an action.
const (
	VerdictUnknown Verdict = iota
	VerdictHealthy
	VerdictUnhealthy
)

// GateAction is what the gate does to a node.
type GateAction string

// Gate actions.
const (
	ActionNone   GateAction = "none"
	ActionDrain  GateAction = "drain"
	ActionResume GateAction = "resume"
)

// Gate drains this node when its GPUs fail and resumes it when they are
// healthy again, touching only what gpuwatch itself drained.
type Gate struct {
	Control NodeControl
	// Drain and Resume are what the caller asked for; the gate does
	// neither unless asked.
	Drain, Resume bool
}

// Outcome is what the gate found and did.
type Outcome struct {
	Node   string
	Before NodeState // as read before acting; zero when not read
	Action GateAction
	Reason string // the drain reason written (ActionDrain)
	// Why says, for a person, why the gate acted or did not.
	Why string
}

// Plan decides what to do with a node in state st for verdict v, where
// reason is the drain reason gpuwatch would write. The rules: an unknown
// verdict does nothing; a failed one drains a node that is neither drained
// nor down (and updates the reason of a node gpuwatch drained, when the
// cause changed); a healthy one resumes a node only when gpuwatch drained
// it and it is not down. A node an admin drained, or one DOWN or FAILing,
// is never touched.
func Plan(st NodeState, v Verdict, reason string, drain, resume bool) (GateAction, string) {
	switch {
	case v == VerdictUnknown:
		return ActionNone, "health unknown: nothing changed"
	case v == VerdictUnhealthy && !drain, v == VerdictHealthy && !resume:
		return ActionNone, "not asked to act on this verdict"
	case st.Down():
		return ActionNone, fmt.Sprintf("node is %s (%q): left as it is", st, st.Reason)
	case v == VerdictHealthy && !st.Drained():
		return ActionNone, "healthy and not drained"
	case st.Drained() && !st.DrainedByGpuwatch():
		return ActionNone, fmt.Sprintf("drained by someone else (%q): left as it is", st.Reason)
	case v == VerdictHealthy:
		return ActionResume, fmt.Sprintf("every GPU is healthy again: resuming, gpuwatch drained it (%q)", st.Reason)
	case st.Drained() && st.Reason == reason:
		return ActionNone, "already drained by gpuwatch for this cause"
	case st.Drained():
		return ActionDrain, fmt.Sprintf("drained by gpuwatch for another cause (%q): updating the reason", st.Reason)
	}
	return ActionDrain, "a GPU failed: draining"
}

// Apply reads node's state and acts on verdict v; summary names what failed
// (the drain reason's text). An unknown verdict runs no command at all.
// Slurm has no compare-and-set of a node's state: an admin's drain that
// lands between the read and the resume is resumed, a window of one
// scontrol call.
func (g Gate) Apply(ctx context.Context, node string, v Verdict, summary string) (Outcome, error) {
	o := Outcome{Node: node, Action: ActionNone}
	if v == VerdictUnknown || (v == VerdictUnhealthy && !g.Drain) || (v == VerdictHealthy && !g.Resume) {
		o.Action, o.Why = Plan(NodeState{}, v, "", g.Drain, g.Resume)
		return o, nil
	}
	st, err := g.Control.Show(ctx, node)
	if err != nil {
		return o, fmt.Errorf("reading node %s's state: %w", node, err)
	}
	o.Before = st
	reason := DrainReason(summary)
	o.Action, o.Why = Plan(st, v, reason, g.Drain, g.Resume)
	switch o.Action {
	case ActionDrain:
		o.Reason = reason
		if err := g.Control.Drain(ctx, node, reason); err != nil {
			return o, fmt.Errorf("draining node %s: %w", node, err)
		}
	case ActionResume:
		if err := g.Control.Resume(ctx, node); err != nil {
			return o, fmt.Errorf("resuming node %s: %w", node, err)
		}
	}
	return o, nil
}
