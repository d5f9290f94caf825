package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// NodeRecord is one node's state in one partition, or, for Slurm versions
// whose sinfo groups identical nodes into one record, a group of NodeCount
// nodes (then Node is "" and Nodes lists them).
type NodeRecord struct {
	Node      string   // set when the record is one node
	Nodes     []string // every node of the record
	NodeCount int
	Partition string
	// State is the normalized label: idle, mixed, allocated, completing,
	// drained, draining, down, fail, failing, maint, reserved, planned,
	// future, powered_down, unknown, ...
	State string
	CPUs  CPUStates
	// GPUsTotal and GPUsUsed are per type, summed over the record's nodes.
	GPUsTotal []GPUCount
	GPUsUsed  []GPUCount
}

// CPUStates are CPU counts as sinfo's %C reports them: allocated, idle,
// other (on nodes that cannot run jobs: down, drained, ...), total.
type CPUStates struct {
	Allocated, Idle, Other, Total int
}

// Available says whether the scheduler can place new work on a node in
// this state; CPUs and GPUs of unavailable nodes count as "other".
func stateAvailable(state string) bool {
	switch state {
	case "idle", "mixed", "allocated", "completing", "reserved", "planned":
		return true
	}
	return false
}

// normalizeNodeState turns Slurm's base state and flags ("MIXED" +
// ["DRAIN"]) into one label.
func normalizeNodeState(base string, flags []string) string {
	base = strings.ToLower(strings.TrimSpace(base))
	// Strip sinfo's suffix symbols: * not responding, ~ powered off, #
	// powering up, ! powering down, % powering off, $ maintenance
	// reservation, @ reboot pending, ^ rebooting, - planned.
	base = strings.TrimRight(base, "*~#!%$@^-")
	switch base {
	case "down", "error", "future", "unknown":
		// Flags do not make a down node more available.
	default:
		if state, ok := flaggedState(base, flags); ok {
			return state
		}
	}
	if state, ok := shortStates[base]; ok {
		return state
	}
	return base
}

// shortStates are the abbreviations sinfo's text output prints for a base
// state, and the label of a node with none.
var shortStates = map[string]string{
	"alloc": "allocated",
	"mix":   "mixed",
	"drain": "drained",
	"drng":  "drained",
	"":      "unknown",
}

// flaggedState is the label a state flag gives a node whose lower-case
// base state is base, in order of precedence (a failing node may also be
// draining); false when no flag changes the label.
func flaggedState(base string, flags []string) (string, bool) {
	has := map[string]bool{}
	for _, f := range flags {
		has[strings.ToUpper(f)] = true
	}
	busy := base == "allocated" || base == "mixed" || base == "completing"
	idle := base == "idle"
	switch {
	case has["FAIL"]:
		return busyOr(busy, "failing", "fail"), true
	case has["DRAIN"]:
		return busyOr(busy, "draining", "drained"), true
	case has["COMPLETING"] && !idle:
		return "completing", true
	case has["MAINTENANCE"]:
		return "maint", true
	case has["POWERED_DOWN"] || has["POWER_DOWN"]:
		// Only an idle node is powered down; a busy one keeps its state
		// (and a later flag does not apply).
		return "powered_down", idle
	case has["RESERVED"] && idle:
		return "reserved", true
	case has["PLANNED"] && idle:
		return "planned", true
	}
	return "", false
}

// busyOr is busyState for a node running work, else state.
func busyOr(busy bool, busyState, state string) string {
	if busy {
		return busyState
	}
	return state
}

// sinfoJSON reads both shapes of `sinfo --json`:
//   - openapi v0.0.38 (22.05): {"nodes": [{name, state, state_flags,
//     partitions, cpus, alloc_cpus, idle_cpus, gres, gres_used}]};
//   - data_parser v0.0.39+ (23.02, 23.11, 24.x): {"sinfo": [{node: {state},
//     nodes: {nodes, total}, cpus: {allocated, idle, other, total},
//     gres: {total, used}, partition: {name}}]}.
type sinfoJSON struct {
	Errors jsonErrors      `json:"errors"`
	Nodes  []nodeJSON      `json:"nodes"`
	Sinfo  []sinfoDataJSON `json:"sinfo"`
}

type nodeJSON struct {
	Name       string      `json:"name"`
	State      flexStrings `json:"state"`
	StateFlags []string    `json:"state_flags"`
	Partitions []string    `json:"partitions"`
	CPUs       flexNumber  `json:"cpus"`
	AllocCPUs  flexNumber  `json:"alloc_cpus"`
	IdleCPUs   flexNumber  `json:"idle_cpus"`
	Gres       string      `json:"gres"`
	GresUsed   string      `json:"gres_used"`
}

type sinfoDataJSON struct {
	Node struct {
		State flexStrings `json:"state"`
	} `json:"node"`
	Nodes struct {
		Nodes flexHostlist `json:"nodes"`
		Total flexNumber   `json:"total"`
	} `json:"nodes"`
	CPUs struct {
		Allocated flexNumber `json:"allocated"`
		Idle      flexNumber `json:"idle"`
		Other     flexNumber `json:"other"`
		Total     flexNumber `json:"total"`
	} `json:"cpus"`
	Gres struct {
		Total string `json:"total"`
		Used  string `json:"used"`
	} `json:"gres"`
	Partition struct {
		Name string `json:"name"`
	} `json:"partition"`
}

// ParseSinfoJSON reads `sinfo --json` of any supported schema.
func ParseSinfoJSON(data []byte) ([]NodeRecord, error) {
	var doc sinfoJSON
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, jsonSyntaxError("sinfo --json", data, err)
	}
	if doc.Nodes == nil && doc.Sinfo == nil {
		if err := doc.Errors.err("sinfo"); err != nil {
			return nil, err
		}
		if !bytes.Contains(data, []byte(`"nodes"`)) && !bytes.Contains(data, []byte(`"sinfo"`)) {
			return nil, fmt.Errorf("sinfo --json: neither a \"nodes\" nor a \"sinfo\" list in the output")
		}
	}
	var out []NodeRecord
	for i := range doc.Nodes {
		recs, err := doc.Nodes[i].records()
		if err != nil {
			return nil, fmt.Errorf("sinfo --json: nodes[%d] (%s): %w", i, doc.Nodes[i].Name, err)
		}
		out = append(out, recs...)
	}
	for i := range doc.Sinfo {
		rec, err := doc.Sinfo[i].record()
		if err != nil {
			return nil, fmt.Errorf("sinfo --json: sinfo[%d]: %w", i, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

func (n *nodeJSON) records() ([]NodeRecord, error) {
	if n.Name == "" {
		return nil, fmt.Errorf("field name is empty")
	}
	var base string
	flags := n.StateFlags
	if len(n.State) > 0 {
		base = n.State[0]
		flags = append(append([]string(nil), flags...), n.State[1:]...)
	}
	state := normalizeNodeState(base, flags)
	total, err := ParseGRES(n.Gres)
	if err != nil {
		return nil, fmt.Errorf("field gres: %w", err)
	}
	used, err := ParseGRES(n.GresUsed)
	if err != nil {
		return nil, fmt.Errorf("field gres_used: %w", err)
	}
	cpus := cpuStates(state, n.CPUs.Int(), n.AllocCPUs.Int(), n.IdleCPUs.Int(), n.IdleCPUs.Set)
	parts := n.Partitions
	if len(parts) == 0 {
		parts = []string{""}
	}
	recs := make([]NodeRecord, 0, len(parts))
	for _, p := range parts {
		recs = append(recs, NodeRecord{
			Node: n.Name, Nodes: []string{n.Name}, NodeCount: 1, Partition: p, State: state,
			CPUs: cpus, GPUsTotal: sumByType(total), GPUsUsed: sumByType(used),
		})
	}
	return recs, nil
}

// cpuStates splits a node's CPUs as sinfo's %C does: on a node that cannot
// run jobs, unallocated CPUs are "other", not idle.
func cpuStates(state string, total, alloc, idle int, idleKnown bool) CPUStates {
	if !idleKnown {
		idle = total - alloc
	}
	if !stateAvailable(state) {
		return CPUStates{Allocated: alloc, Other: total - alloc, Total: total}
	}
	return CPUStates{Allocated: alloc, Idle: idle, Other: total - alloc - idle, Total: total}
}

func (s *sinfoDataJSON) record() (NodeRecord, error) {
	var base string
	var flags []string
	if len(s.Node.State) > 0 {
		base, flags = s.Node.State[0], s.Node.State[1:]
	}
	n := len(s.Nodes.Nodes)
	if n == 0 {
		n = s.Nodes.Total.Int()
	}
	total, err := ParseGRES(s.Gres.Total)
	if err != nil {
		return NodeRecord{}, fmt.Errorf("field gres/total: %w", err)
	}
	used, err := ParseGRES(s.Gres.Used)
	if err != nil {
		return NodeRecord{}, fmt.Errorf("field gres/used: %w", err)
	}
	// gres/total is the configured GRES of one node of the group.
	for i := range total {
		total[i].Count *= n
	}
	rec := NodeRecord{
		Nodes: []string(s.Nodes.Nodes), NodeCount: n, Partition: s.Partition.Name,
		State: normalizeNodeState(base, flags),
		CPUs: CPUStates{
			Allocated: s.CPUs.Allocated.Int(), Idle: s.CPUs.Idle.Int(),
			Other: s.CPUs.Other.Int(), Total: s.CPUs.Total.Int(),
		},
		GPUsTotal: sumByType(total), GPUsUsed: sumByType(used),
	}
	if n == 1 && len(rec.Nodes) == 1 {
		rec.Node = rec.Nodes[0]
	}
	return rec, nil
}

// SinfoFormattedArgs is the fallback for Slurm without --json: one line per
// node and partition, '|' separated, with GRES in use (which -o cannot
// print, hence -O).
var SinfoFormattedArgs = []string{"-h", "-N", "-O", "NodeList:|,Partition:|,StateLong:|,CPUsState:|,Gres:|,GresUsed:"}

// ParseSinfoFormatted reads the output of `sinfo SinfoFormattedArgs...`:
// node|partition|state|A/I/O/T|gres|gres_used.
func ParseSinfoFormatted(data []byte) ([]NodeRecord, error) {
	var out []NodeRecord
	err := scanPipeRecords(data, "sinfo -O", 6, func(line int, f []string) error {
		if f[0] == "" {
			return fmt.Errorf("sinfo -O: line %d: field 1 (node) is empty", line)
		}
		state := normalizeNodeState(f[2], nil)
		cpus, err := parseCPUsState(f[3])
		if err != nil {
			return fmt.Errorf("sinfo -O: line %d: field 4 (cpus A/I/O/T): %w", line, err)
		}
		total, err := ParseGRES(f[4])
		if err != nil {
			return fmt.Errorf("sinfo -O: line %d: field 5 (gres): %w", line, err)
		}
		used, err := ParseGRES(f[5])
		if err != nil {
			return fmt.Errorf("sinfo -O: line %d: field 6 (gres used): %w", line, err)
		}
		out = append(out, NodeRecord{
			Node: f[0], Nodes: []string{f[0]}, NodeCount: 1,
			Partition: strings.TrimSuffix(f[1], "*"), State: state, CPUs: cpus,
			GPUsTotal: sumByType(total), GPUsUsed: sumByType(used),
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseCPUsState reads "A/I/O/T".
func parseCPUsState(s string) (CPUStates, error) {
	p := strings.Split(s, "/")
	if len(p) != 4 {
		return CPUStates{}, fmt.Errorf("%q is not A/I/O/T", s)
	}
	var v [4]int
	for i := range p {
		n, err := strconv.Atoi(p[i])
		if err != nil {
			return CPUStates{}, fmt.Errorf("%q is not A/I/O/T", s)
		}
		v[i] = n
	}
	return CPUStates{Allocated: v[0], Idle: v[1], Other: v[2], Total: v[3]}, nil
}
