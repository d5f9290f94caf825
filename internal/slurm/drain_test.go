package slurm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseNodeText(t *testing.T) {
	cases := []struct {
		file string
		want NodeState
	}{
		{"scontrol_show_node_idle.txt", NodeState{Name: "vm", State: "IDLE"}},
		{"scontrol_show_node_drain.txt", NodeState{Name: "vm", State: "IDLE", Flags: []string{"DRAIN"},
			Reason: "gpuwatch: GPU 3 XID 79 a=b Reason=x"}},
		{"scontrol_show_node_down.txt", NodeState{Name: "vm", State: "DOWN", Flags: []string{"NOT_RESPONDING"},
			Reason: "admin down"}},
	}
	for _, c := range cases {
		got, err := ParseNodeText(readFixture(t, "22.05", c.file), "vm")
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if got.String() != c.want.String() || got.Reason != c.want.Reason || got.Name != c.want.Name {
			t.Errorf("%s: %+v, want %+v", c.file, got, c.want)
		}
	}
	st, _ := ParseNodeText(readFixture(t, "22.05", "scontrol_show_node_drain.txt"), "vm")
	if !st.Drained() || !st.DrainedByGpuwatch() || st.Down() {
		t.Errorf("drained by gpuwatch: %+v", st)
	}
	st, _ = ParseNodeText(readFixture(t, "22.05", "scontrol_show_node_down.txt"), "vm")
	if st.Drained() || !st.Down() {
		t.Errorf("down: %+v", st)
	}
}

func TestParseNodeJSON(t *testing.T) {
	st, err := ParseNodeJSON(readFixture(t, "23.02", "scontrol_show_node.json"), "gpu-07")
	if err != nil {
		t.Fatal(err)
	}
	if st.String() != "MIXED+DRAIN" || st.Reason != "gpuwatch: GPU 3 XID 79 (GPU has fallen off the bus)" || !st.DrainedByGpuwatch() {
		t.Errorf("23.02: %+v", st)
	}
	st, err = ParseNodeJSON(readFixture(t, "23.11", "scontrol_show_node.json"), "gpu-02")
	if err != nil {
		t.Fatal(err)
	}
	if st.String() != "IDLE+DRAIN" || !st.Drained() || st.DrainedByGpuwatch() || st.Down() {
		t.Errorf("23.11, drained by an admin: %+v", st)
	}
	// The openapi v0.0.38 shape (slurmrestd of 22.05): state and state_flags.
	st, err = ParseNodeJSON([]byte(`{"nodes":[{"name":"n1","state":"down","state_flags":["DRAIN","NOT_RESPONDING"],"reason":"Not responding"}]}`), "n1")
	if err != nil || st.String() != "DOWN+DRAIN+NOT_RESPONDING" || !st.Down() {
		t.Errorf("v0.0.38: %+v %v", st, err)
	}
}

// TestParseNodeMalformed: anything but a node's state is an error that
// says what is wrong, never a state.
func TestParseNodeMalformed(t *testing.T) {
	jsonCases := map[string]string{
		"not JSON":            `NodeName=n1 State=IDLE`,
		"truncated":           `{"nodes":[{"name":"n1","state":["IDLE"`,
		"no nodes list":       `{"meta":{},"errors":[]}`,
		"other node":          `{"nodes":[{"name":"n10","state":["IDLE"]}]}`,
		"no state":            `{"nodes":[{"name":"n1","reason":""}]}`,
		"wrong type":          `{"nodes":[{"name":"n1","state":7}]}`,
		"Slurm's error":       `{"nodes":[],"errors":[{"description":"Invalid node name specified","error_number":2009}]}`,
		"reason not a string": `{"nodes":[{"name":"n1","state":["IDLE"],"reason":{"x":1}}]}`,
	}
	for name, in := range jsonCases {
		if st, err := ParseNodeJSON([]byte(in), "n1"); err == nil {
			t.Errorf("JSON %s: got %+v, want an error", name, st)
		} else if !strings.Contains(err.Error(), "scontrol show node") {
			t.Errorf("JSON %s: error %q does not name the command", name, err)
		}
	}
	textCases := map[string]string{
		"empty":        ``,
		"not scontrol": "Node n1 not found\n",
		"other node":   "NodeName=n10 Arch=x86_64\n   State=IDLE\n",
		"no state":     "NodeName=n1 Arch=x86_64\n   Reason=x [root@2026-12-02T06:59:31]\n",
		"JSON":         `{"nodes":[{"name":"n1","state":["IDLE"]}]}`,
	}
	for name, in := range textCases {
		if st, err := ParseNodeText([]byte(in), "n1"); err == nil {
			t.Errorf("text %s: got %+v, want an error", name, st)
		}
	}
}

func TestDrainReason(t *testing.T) {
	if got, want := DrainReason("GPU 3 XID 79 (GPU has fallen off the bus)"), "gpuwatch: GPU 3 XID 79 (GPU has fallen off the bus)"; got != want {
		t.Errorf("DrainReason = %q, want %q", got, want)
	}
	if got, want := DrainReason("GPU 1\n\tgpu_lost\x1b[2J\u0085 x\x00"), "gpuwatch: GPU 1 gpu_lost [2J x"; got != want {
		t.Errorf("control characters: %q, want %q", got, want)
	}
	long := DrainReason(strings.Repeat("GPU 7 XID 79 (fällt vom Bus); ", 20))
	if len(long) > MaxDrainReason || !utf8.ValidString(long) || !strings.HasSuffix(long, "…") || !strings.HasPrefix(long, DrainReasonPrefix) {
		t.Errorf("long reason: %d bytes %q", len(long), long)
	}
}

func TestCheckNodeName(t *testing.T) {
	for _, ok := range []string{"n2", "gpu-001", "node_7.cluster"} {
		if err := CheckNodeName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "n[1-4]", "n1,n2", "n1 State=RESUME", "n1\n", strings.Repeat("a", 65), "ümlaut"} {
		if err := CheckNodeName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPlan(t *testing.T) {
	const ours = "gpuwatch: GPU 3 XID 79 (GPU has fallen off the bus)"
	idle := NodeState{Name: "n", State: "IDLE"}
	mixed := NodeState{Name: "n", State: "MIXED"}
	ourDrain := NodeState{Name: "n", State: "MIXED", Flags: []string{"DRAIN"}, Reason: ours}
	ourOldDrain := NodeState{Name: "n", State: "IDLE", Flags: []string{"DRAIN"}, Reason: "gpuwatch: GPU 1 gpu_lost"}
	adminDrain := NodeState{Name: "n", State: "IDLE", Flags: []string{"DRAIN"}, Reason: "bad DIMM"}
	down := NodeState{Name: "n", State: "DOWN", Flags: []string{"NOT_RESPONDING"}, Reason: "Not responding"}
	downOurs := NodeState{Name: "n", State: "DOWN", Flags: []string{"DRAIN"}, Reason: ours}
	failing := NodeState{Name: "n", State: "IDLE", Flags: []string{"DRAIN", "FAIL"}, Reason: ours}
	cases := []struct {
		name          string
		st            NodeState
		v             Verdict
		drain, resume bool
		want          GateAction
	}{
		{"unknown drains nothing", idle, VerdictUnknown, true, true, ActionNone},
		{"unknown resumes nothing", ourDrain, VerdictUnknown, true, true, ActionNone},
		{"fail drains", idle, VerdictUnhealthy, true, true, ActionDrain},
		{"fail drains a busy node", mixed, VerdictUnhealthy, true, false, ActionDrain},
		{"fail without --slurm.drain", idle, VerdictUnhealthy, false, true, ActionNone},
		{"fail, already ours", ourDrain, VerdictUnhealthy, true, true, ActionNone},
		{"fail, ours for another cause", ourOldDrain, VerdictUnhealthy, true, true, ActionDrain},
		{"fail, an admin's drain", adminDrain, VerdictUnhealthy, true, true, ActionNone},
		{"fail, down", down, VerdictUnhealthy, true, true, ActionNone},
		{"healthy resumes ours", ourDrain, VerdictHealthy, true, true, ActionResume},
		{"healthy without --slurm.resume", ourDrain, VerdictHealthy, true, false, ActionNone},
		{"healthy, not drained", idle, VerdictHealthy, true, true, ActionNone},
		{"healthy, an admin's drain", adminDrain, VerdictHealthy, true, true, ActionNone},
		{"healthy, down with our reason", downOurs, VerdictHealthy, true, true, ActionNone},
		{"healthy, failing with our reason", failing, VerdictHealthy, true, true, ActionNone},
		{"healthy, down", down, VerdictHealthy, true, true, ActionNone},
	}
	for _, c := range cases {
		got, why := Plan(c.st, c.v, ours, c.drain, c.resume)
		if got != c.want || why == "" {
			t.Errorf("%s: %s (%q), want %s", c.name, got, why, c.want)
		}
	}
}

// nodeRunner is scontrol for one node: show (JSON only when json is set,
// as in Slurm 23.02 and later) and update, which it applies.
type nodeRunner struct {
	json  bool
	st    NodeState
	calls [][]string
	// showOut, when set, is what show prints instead.
	showOut    string
	failUpdate error
}

func (r *nodeRunner) Run(_ context.Context, path string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, append([]string{path}, args...))
	switch {
	case len(args) >= 3 && args[0] == "show" && args[1] == "node":
		if args[2] != r.st.Name {
			return nil, &CommandError{Command: "scontrol", Err: errors.New("exit status 1"), Stderr: "Node " + args[2] + " not found"}
		}
		if slices.Contains(args, "--json") && !r.json {
			return nil, &CommandError{Command: "scontrol", Err: errors.New("exit status 1"), Stderr: "scontrol: unrecognized option '--json'"}
		}
		if r.showOut != "" {
			return []byte(r.showOut), nil
		}
		if r.json {
			return fmt.Appendf(nil, `{"nodes":[{"name":%q,"state":[%q%s],"reason":%q}],"errors":[]}`,
				r.st.Name, r.st.State, quotedFlags(r.st.Flags), r.st.Reason), nil
		}
		out := fmt.Sprintf("NodeName=%s Arch=x86_64 CoresPerSocket=1\n   State=%s ThreadsPerCore=1\n", r.st.Name, r.st)
		if r.st.Reason != "" {
			out += "   Reason=" + r.st.Reason + " [root@2026-12-02T06:59:31]\n"
		}
		return []byte(out), nil
	case len(args) >= 3 && args[0] == "update":
		if r.failUpdate != nil {
			return nil, r.failUpdate
		}
		for _, a := range args[2:] {
			switch {
			case a == "State=DRAIN":
				if !r.st.Drained() {
					r.st.Flags = append(r.st.Flags, "DRAIN")
				}
			case a == "State=RESUME":
				r.st.Flags = slices.DeleteFunc(r.st.Flags, func(f string) bool { return f == "DRAIN" })
				r.st.Reason = ""
			case strings.HasPrefix(a, "Reason="):
				r.st.Reason = strings.TrimPrefix(a, "Reason=")
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("nodeRunner: unexpected %v", args)
}

func quotedFlags(flags []string) string {
	var b strings.Builder
	for _, f := range flags {
		fmt.Fprintf(&b, ",%q", f)
	}
	return b.String()
}

func (r *nodeRunner) updates() [][]string {
	var out [][]string
	for _, c := range r.calls {
		if c[1] == "update" {
			out = append(out, c[1:])
		}
	}
	return out
}

// TestGateDrainsAndResumes: a failure drains the node with gpuwatch's
// reason, a second run changes nothing, health resumes it; with either
// form of scontrol show node.
func TestGateDrainsAndResumes(t *testing.T) {
	for _, json := range []bool{true, false} {
		r := &nodeRunner{json: json, st: NodeState{Name: "n2", State: "IDLE"}}
		g := Gate{Control: NodeControl{Scontrol: "/usr/bin/scontrol", Format: "auto", Runner: r}, Drain: true, Resume: true}
		o, err := g.Apply(context.Background(), "n2", VerdictUnhealthy, "GPU 3 XID 79 (GPU has fallen off the bus)")
		if err != nil || o.Action != ActionDrain {
			t.Fatalf("json=%v: fail: %+v %v", json, o, err)
		}
		want := []string{"update", "NodeName=n2", "State=DRAIN", "Reason=gpuwatch: GPU 3 XID 79 (GPU has fallen off the bus)"}
		if u := r.updates(); len(u) != 1 || !slices.Equal(u[0], want) {
			t.Fatalf("json=%v: updates %q, want %q", json, u, want)
		}
		if o, err = g.Apply(context.Background(), "n2", VerdictUnhealthy, "GPU 3 XID 79 (GPU has fallen off the bus)"); err != nil || o.Action != ActionNone {
			t.Errorf("json=%v: second run: %+v %v", json, o, err)
		}
		if o, err = g.Apply(context.Background(), "n2", VerdictUnknown, ""); err != nil || o.Action != ActionNone {
			t.Errorf("json=%v: unknown: %+v %v", json, o, err)
		}
		if o, err = g.Apply(context.Background(), "n2", VerdictHealthy, ""); err != nil || o.Action != ActionResume {
			t.Errorf("json=%v: healthy: %+v %v", json, o, err)
		}
		if r.st.Drained() || len(r.updates()) != 2 {
			t.Errorf("json=%v: after resume: %+v, updates %q", json, r.st, r.updates())
		}
	}
}

// TestGateLeavesOthersAlone: an unknown verdict runs no command; an
// admin's drain and a DOWN node are read and left; malformed output and a
// failed update are errors.
func TestGateLeavesOthersAlone(t *testing.T) {
	ctx := context.Background()
	r := &nodeRunner{json: true, st: NodeState{Name: "n2", State: "IDLE"}}
	g := Gate{Control: NodeControl{Scontrol: "scontrol", Format: "auto", Runner: r}, Drain: true, Resume: true}
	if _, err := g.Apply(ctx, "n2", VerdictUnknown, "x"); err != nil || len(r.calls) != 0 {
		t.Errorf("unknown verdict ran %q (%v)", r.calls, err)
	}
	for _, st := range []NodeState{
		{Name: "n2", State: "IDLE", Flags: []string{"DRAIN"}, Reason: "bad DIMM"},
		{Name: "n2", State: "DOWN", Flags: []string{"NOT_RESPONDING"}, Reason: "Not responding"},
	} {
		for _, v := range []Verdict{VerdictUnhealthy, VerdictHealthy} {
			r.st, r.calls = st, nil
			o, err := g.Apply(ctx, "n2", v, "GPU 0 gpu_lost")
			if err != nil || o.Action != ActionNone || len(r.updates()) != 0 || r.st.Reason != st.Reason {
				t.Errorf("%s %q, verdict %d: %+v %v, updates %q", st, st.Reason, v, o, err, r.updates())
			}
		}
	}
	r.st, r.calls, r.showOut = NodeState{Name: "n2", State: "IDLE"}, nil, `{"nodes":[{"name":"n2","state":`
	if o, err := g.Apply(ctx, "n2", VerdictUnhealthy, "GPU 0 gpu_lost"); err == nil || len(r.updates()) != 0 {
		t.Errorf("malformed JSON: %+v %v, updates %q", o, err, r.updates())
	} else if !strings.Contains(err.Error(), "reading node n2's state: scontrol show node --json: invalid JSON") {
		t.Errorf("malformed JSON: %v", err)
	}
	r.showOut, r.failUpdate = "", &CommandError{Command: "scontrol update", Err: errors.New("exit status 1"), Stderr: "Invalid user id"}
	if _, err := g.Apply(ctx, "n2", VerdictUnhealthy, "GPU 0 gpu_lost"); err == nil || !strings.Contains(err.Error(), "draining node n2") {
		t.Errorf("failed update: %v", err)
	}
	if _, err := g.Apply(ctx, "n2[1-2]", VerdictUnhealthy, "x"); err == nil {
		t.Errorf("a host list was accepted as the node")
	}
	// --slurm.format=json on a scontrol without --json: an error, no text fallback.
	r = &nodeRunner{json: false, st: NodeState{Name: "n2", State: "IDLE"}}
	g.Control = NodeControl{Scontrol: "scontrol", Format: "json", Runner: r}
	if _, err := g.Apply(ctx, "n2", VerdictUnhealthy, "x"); err == nil || len(r.calls) != 1 {
		t.Errorf("format json without --json: %v, calls %q", err, r.calls)
	}
	g.Control.Format = "text"
	if _, err := g.Apply(ctx, "n3", VerdictUnhealthy, "x"); err == nil || !strings.Contains(err.Error(), "Node n3 not found") {
		t.Errorf("unknown node: %v", err)
	}
}
