package slurm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// GPUCount is a number of GPUs of one type. Type is "" when Slurm does not
// name one (gres "gpu:2" or TRES "gres/gpu=2").
type GPUCount struct {
	Type  string
	Count int
}

// NodeGPUs is the GPUs a job holds on one node, with their indexes on that
// node when Slurm reports them ("gpu:h100:2(IDX:0-1)").
type NodeGPUs struct {
	Node    string
	Type    string
	Count   int
	Indexes []int
}

// ParseGRES reads a GRES string as sinfo, squeue and scontrol print it and
// returns the GPU entries, in order. Entries of other resources (mps, shard,
// licenses) are skipped. Accepted forms, comma separated:
//
//	gpu:a100:4            gpu:4            gres:gpu:1 (tres_per_node in 22.05)
//	gpu:h100:2(IDX:0-1)   gpu:h100:2(S:0-1)  gpu:a100:0(IDX:N/A)
//	gres/gpu:a100=4       gres/gpu=2 (TRES form)
//
// A value that cannot be read is an error naming the entry; "(null)", "N/A"
// and "" are no GPUs.
func ParseGRES(s string) ([]GPUCount, error) {
	entries, err := parseGPUEntries(s)
	if err != nil {
		return nil, err
	}
	out := make([]GPUCount, 0, len(entries))
	for _, e := range entries {
		out = append(out, GPUCount{Type: e.Type, Count: e.Count})
	}
	return out, nil
}

// ParseGRESDetail reads a GRES string with indexes, as in gres_used or in
// `scontrol show job -d` (GRES=gpu:h100:1(IDX:0)), and returns one NodeGPUs
// per GPU type with Node left empty.
func ParseGRESDetail(s string) ([]NodeGPUs, error) {
	return parseGPUEntries(s)
}

// parseGPUEntries parses a GRES list into one NodeGPUs per GPU entry, Node unset.
func parseGPUEntries(s string) ([]NodeGPUs, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(null)" || s == "N/A" || s == "none" {
		return nil, nil
	}
	var out []NodeGPUs
	for _, raw := range splitOutside(s, '(', ')') {
		if raw == "" {
			continue
		}
		e, isGPU, err := parseOneGPUEntry(raw)
		if err != nil {
			return nil, err
		}
		if isGPU {
			out = append(out, e)
		}
	}
	return out, nil
}

func parseOneGPUEntry(raw string) (NodeGPUs, bool, error) {
	body, detail := raw, ""
	if i := strings.IndexByte(raw, '('); i >= 0 {
		if !strings.HasSuffix(raw, ")") {
			return NodeGPUs{}, false, fmt.Errorf("gres entry %q: unclosed parenthesis", raw)
		}
		body, detail = raw[:i], raw[i+1:len(raw)-1]
	}
	body = strings.TrimPrefix(body, "gres:")
	body = strings.TrimPrefix(body, "gres/")
	name, rest, _ := strings.Cut(body, ":")
	// TRES form: gpu=2 or gpu:a100=2.
	if n, v, ok := strings.Cut(name, "="); ok {
		name, rest = n, "="+v
	}
	if name != "gpu" {
		return NodeGPUs{}, false, nil
	}
	var typ, countStr string
	switch {
	case strings.Contains(rest, "="):
		typ, countStr, _ = strings.Cut(rest, "=")
	case rest == "":
		// "gpu" alone means one GPU (as in --gres=gpu).
		countStr = "1"
	default:
		// type:count, count, or type alone (count 1). A count may carry
		// a unit suffix in configs ("gpu:2K" is never seen for GPUs;
		// reject it rather than guess).
		if t, c, ok := strings.Cut(rest, ":"); ok {
			typ, countStr = t, c
		} else if isDigits(rest) {
			countStr = rest
		} else {
			typ, countStr = rest, "1"
		}
	}
	count, err := strconv.Atoi(countStr)
	if err != nil || count < 0 {
		return NodeGPUs{}, false, fmt.Errorf("gres entry %q: count %q is not a non-negative integer", raw, countStr)
	}
	e := NodeGPUs{Type: typ, Count: count}
	if after, ok := strings.CutPrefix(detail, "IDX:"); ok {
		idx, err := parseIndexList(after)
		if err != nil {
			return NodeGPUs{}, false, fmt.Errorf("gres entry %q: %w", raw, err)
		}
		e.Indexes = idx
	}
	return e, true, nil
}

// parseIndexList reads "0-1,3" into [0 1 3]; "N/A" is empty.
func parseIndexList(s string) ([]int, error) {
	if s == "" || s == "N/A" {
		return nil, nil
	}
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("index %q is not a number", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("index range %q is not lo-hi", part)
			}
		}
		if b-a > 4096 {
			return nil, fmt.Errorf("index range %q is implausibly long", part)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// ParseTRES reads a TRES string ("cpu=4,mem=8G,node=1,gres/gpu=2,
// gres/gpu:a100=2") and returns its CPU count and GPU counts. When both a
// total (gres/gpu=N) and typed entries (gres/gpu:T=M) are present, the typed
// entries win and the remainder N-ΣM, if any, is kept with an empty type, so
// that GPUs are never counted twice.
func ParseTRES(s string) (cpus int, gpus []GPUCount, err error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(null)" || s == "N/A" {
		return 0, nil, nil
	}
	untyped, hasUntyped := 0, false
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, val, ok := strings.Cut(part, "=")
		if !ok {
			return 0, nil, fmt.Errorf("tres entry %q: want key=value", part)
		}
		switch {
		case key == "cpu":
			n, err := strconv.Atoi(val)
			if err != nil {
				return 0, nil, fmt.Errorf("tres entry %q: cpu count %q is not an integer", part, val)
			}
			cpus = n
		case key == "gres/gpu":
			n, err := strconv.Atoi(val)
			if err != nil {
				return 0, nil, fmt.Errorf("tres entry %q: gpu count %q is not an integer", part, val)
			}
			untyped, hasUntyped = n, true
		case strings.HasPrefix(key, "gres/gpu:"):
			n, err := strconv.Atoi(val)
			if err != nil {
				return 0, nil, fmt.Errorf("tres entry %q: gpu count %q is not an integer", part, val)
			}
			gpus = append(gpus, GPUCount{Type: strings.TrimPrefix(key, "gres/gpu:"), Count: n})
		}
	}
	typed := 0
	for _, g := range gpus {
		typed += g.Count
	}
	if hasUntyped && untyped > typed {
		gpus = append(gpus, GPUCount{Count: untyped - typed})
	}
	return cpus, gpus, nil
}

// sumByType merges counts of the same type and sorts by type.
func sumByType(in []GPUCount) []GPUCount {
	if len(in) <= 1 {
		return in
	}
	m := map[string]int{}
	for _, g := range in {
		m[g.Type] += g.Count
	}
	out := make([]GPUCount, 0, len(m))
	for t, c := range m {
		out = append(out, GPUCount{Type: t, Count: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// splitOutside splits on the commas that are not between open and close,
// trimming each part: "gpu:a:2(IDX:0,2),gpu:b:1(IDX:1)" has two GRES
// entries (parentheses), "n[1-2,4],m1" two hostlist items (brackets).
func splitOutside(s string, open, close byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case open:
			depth++
		case close:
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
