package slurm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// DrainReasonPrefix starts every drain reason gpuwatch writes. A node
// drained with any other reason was drained by someone else (an admin, NHC,
// Slurm itself), and the health gate never resumes it.
const DrainReasonPrefix = "gpuwatch:"

// MaxDrainReason bounds a drain reason in bytes. Slurm stores a reason of
// any length, but sinfo -R, scontrol and squeue's pending reasons show it
// on one line, where a person must be able to read it whole.
const MaxDrainReason = 160

// maxNodeName bounds a node name: Slurm's own bound on a host name
// (HOST_NAME_MAX) is 64.
const maxNodeName = 64

// DrainReason is the reason gpuwatch drains a node with: the prefix, then
// summary on one line (control characters and runs of blanks become one
// space), cut to MaxDrainReason bytes on a character boundary.
func DrainReason(summary string) string {
	clean := strings.Join(strings.FieldsFunc(summary, func(r rune) bool {
		return r <= ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError
	}), " ")
	reason := DrainReasonPrefix + " " + clean
	if len(reason) <= MaxDrainReason {
		return reason
	}
	const ellipsis = "…"
	cut := MaxDrainReason - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + ellipsis
}

// CheckNodeName accepts a single Slurm node name: letters, digits and
// "-_.", so that it can never be a host list ("n[1-4]", "n1,n2"), a second
// scontrol argument or anything a shell or scontrol would read differently.
func CheckNodeName(name string) error {
	if name == "" {
		return fmt.Errorf("node name is empty")
	}
	if len(name) > maxNodeName {
		return fmt.Errorf("node name %.20q… is longer than %d bytes", name, maxNodeName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("node name %q: only letters, digits and -_. are accepted (one node, not a host list)", name)
		}
	}
	return nil
}

// NodeState is one node's state as `scontrol show node` reports it.
type NodeState struct {
	Name string
	// State is the base state, upper case: IDLE, MIXED, ALLOCATED, DOWN, ...
	State string
	// Flags are the state flags, upper case: DRAIN, FAIL, NOT_RESPONDING, ...
	Flags []string
	// Reason is the node's reason without scontrol's " [user@time]"; "" when none.
	Reason string
}

// Has tells whether the node carries state flag f (upper case).
func (n NodeState) Has(f string) bool { return slices.Contains(n.Flags, f) }

// Drained: the DRAIN flag is set (the node is draining or drained).
func (n NodeState) Drained() bool { return n.Has("DRAIN") }

// Down: the node is DOWN or FAILing, a state Slurm or an admin set for
// reasons of their own.
func (n NodeState) Down() bool { return n.State == "DOWN" || n.Has("FAIL") }

// DrainedByGpuwatch: drained, with a reason gpuwatch wrote.
func (n NodeState) DrainedByGpuwatch() bool {
	return n.Drained() && strings.HasPrefix(n.Reason, DrainReasonPrefix)
}

// String is the state as scontrol prints it: IDLE+DRAIN.
func (n NodeState) String() string { return strings.Join(append([]string{n.State}, n.Flags...), "+") }

// nodeStateJSON is one node of `scontrol show node NAME --json` (Slurm
// 23.02 and later: data_parser v0.0.39+): "state" is the base state then
// the flags (["IDLE", "DRAIN"]). The openapi v0.0.38 shape ("state":
// "idle" with "state_flags") is read too, for slurmrestd dumps.
type nodeStateJSON struct {
	Name       string      `json:"name"`
	State      flexStrings `json:"state"`
	StateFlags []string    `json:"state_flags"`
	Reason     string      `json:"reason"`
}

// ParseNodeJSON reads node name's state from `scontrol show node NAME --json`.
func ParseNodeJSON(data []byte, name string) (NodeState, error) {
	const what = "scontrol show node --json"
	var doc struct {
		Errors jsonErrors       `json:"errors"`
		Nodes  *[]nodeStateJSON `json:"nodes"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return NodeState{}, jsonSyntaxError(what, data, err)
	}
	if err := doc.Errors.err("scontrol show node"); err != nil {
		return NodeState{}, err
	}
	if doc.Nodes == nil {
		return NodeState{}, fmt.Errorf("%s: no \"nodes\" list in the output", what)
	}
	for _, n := range *doc.Nodes {
		if n.Name != name {
			continue
		}
		if len(n.State) == 0 {
			return NodeState{}, fmt.Errorf("%s: node %s has no \"state\"", what, name)
		}
		return newNodeState(name, n.State[0], append(slices.Clone(n.State[1:]), n.StateFlags...), n.Reason), nil
	}
	return NodeState{}, fmt.Errorf("%s: node %s is not in the output (%d other node(s))", what, name, len(*doc.Nodes))
}

// ParseNodeText reads node name's state from `scontrol show node NAME`
// (any Slurm): "NodeName=NAME ..." on the first line, "State=IDLE+DRAIN"
// on another, and the reason on a line of its own,
// "Reason=TEXT [USER@TIME]", which keeps spaces and '=' in TEXT whole.
func ParseNodeText(data []byte, name string) (NodeState, error) {
	const what = "scontrol show node"
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	var (
		found, inNode bool
		state, reason string
		line          int
	)
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "NodeName=") {
			if found {
				break // the next node's record
			}
			pairs := splitScontrolLine(text)
			if pairs[0].val != name {
				return NodeState{}, fmt.Errorf("%s: line %d names node %q, want %s", what, line, pairs[0].val, name)
			}
			found, inNode = true, true
			continue
		}
		if !inNode {
			continue
		}
		if r, ok := strings.CutPrefix(text, "Reason="); ok {
			reason = stripReasonStamp(r)
			continue
		}
		for _, p := range splitScontrolLine(text) {
			if p.key == "State" {
				state = p.val
			}
		}
	}
	if err := sc.Err(); err != nil {
		return NodeState{}, fmt.Errorf("%s: line %d: %w", what, line+1, err)
	}
	if !found {
		return NodeState{}, fmt.Errorf("%s: no NodeName= line in the output: %.80q", what, data)
	}
	if state == "" {
		return NodeState{}, fmt.Errorf("%s: node %s has no State=", what, name)
	}
	parts := strings.Split(state, "+")
	return newNodeState(name, parts[0], parts[1:], reason), nil
}

// stripReasonStamp removes the " [USER@TIME]" scontrol appends to a reason.
func stripReasonStamp(r string) string {
	r = strings.TrimSpace(r)
	if strings.HasSuffix(r, "]") {
		if i := strings.LastIndex(r, " ["); i >= 0 && strings.Contains(r[i:], "@") {
			return r[:i]
		}
	}
	return r
}

// newNodeState normalizes what either form gives: upper case, without
// the symbols sinfo and older scontrol append to a state (DOWN*, IDLE~).
func newNodeState(name, base string, flags []string, reason string) NodeState {
	norm := func(s string) string { return strings.ToUpper(strings.TrimRight(strings.TrimSpace(s), "*~#!%$@^-")) }
	n := NodeState{Name: name, State: norm(base), Reason: reason}
	for _, f := range flags {
		if f = norm(f); f != "" {
			n.Flags = append(n.Flags, f)
		}
	}
	return n
}

// NodeControl reads and changes one node's state with scontrol, an
// argument list and never a shell.
type NodeControl struct {
	Scontrol string // scontrol's path
	// Format: auto (--json, falling back to the text form where scontrol
	// lacks --json, before Slurm 23.02), json or text.
	Format string
	Runner CommandRunner
}

// Show returns node's state and reason.
func (c NodeControl) Show(ctx context.Context, node string) (NodeState, error) {
	if err := CheckNodeName(node); err != nil {
		return NodeState{}, err
	}
	if c.Format != "text" {
		out, err := c.Runner.Run(ctx, c.Scontrol, "show", "node", node, "--json")
		switch {
		case err == nil:
			return ParseNodeJSON(out, node)
		case c.Format == "json" || !jsonUnsupported(err):
			return NodeState{}, err
		}
	}
	out, err := c.Runner.Run(ctx, c.Scontrol, "show", "node", node)
	if err != nil {
		return NodeState{}, err
	}
	return ParseNodeText(out, node)
}

// Drain drains node with reason (DrainReason's).
func (c NodeControl) Drain(ctx context.Context, node, reason string) error {
	if err := CheckNodeName(node); err != nil {
		return err
	}
	_, err := c.Runner.Run(ctx, c.Scontrol, "update", "NodeName="+node, "State=DRAIN", "Reason="+reason)
	return err
}

// Resume returns a drained node to service.
func (c NodeControl) Resume(ctx context.Context, node string) error {
	if err := CheckNodeName(node); err != nil {
		return err
	}
	_, err := c.Runner.Run(ctx, c.Scontrol, "update", "NodeName="+node, "State=RESUME")
	return err
}
