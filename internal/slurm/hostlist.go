package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// maxHostlistNodes bounds the expansion of one hostlist expression, so that a
// corrupt "n[0-999999999]" cannot exhaust memory.
const maxHostlistNodes = 1 << 20

// ExpandHostlist expands a Slurm hostlist expression into node names:
// "gpu-[01-03,07],login1" → gpu-01 gpu-02 gpu-03 gpu-07 login1. Zero padding
// of the low bound is kept. Several bracket groups in one name
// ("r[1-2]n[1-2]") expand as a cartesian product. "" and "(null)" are empty.
func ExpandHostlist(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(null)" || s == "None assigned" {
		return nil, nil
	}
	var out []string
	for _, item := range splitOutside(s, '[', ']') {
		if item == "" {
			continue
		}
		names, err := expandOne(item)
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", s, err)
		}
		out = append(out, names...)
		if len(out) > maxHostlistNodes {
			return nil, fmt.Errorf("hostlist %q: more than %d nodes", s, maxHostlistNodes)
		}
	}
	return out, nil
}

func expandOne(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsRune(item, ']') {
			return nil, fmt.Errorf("unbalanced ']' in %q", item)
		}
		return []string{item}, nil
	}
	closeRel := strings.IndexByte(item[open:], ']')
	if closeRel < 0 {
		return nil, fmt.Errorf("unbalanced '[' in %q", item)
	}
	close := open + closeRel
	prefix, ranges, suffix := item[:open], item[open+1:close], item[close+1:]
	suffixes, err := expandOne(suffix)
	if err != nil {
		return nil, err
	}
	var out []string
	for r := range strings.SplitSeq(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("range %q in %q is not numeric", r, item)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("range %q in %q is not lo-hi", r, item)
			}
		}
		if (b-a+1)*len(suffixes) > maxHostlistNodes {
			return nil, fmt.Errorf("range %q in %q is too long", r, item)
		}
		width := len(lo)
		for i := a; i <= b; i++ {
			num := strconv.Itoa(i)
			if len(num) < width {
				num = strings.Repeat("0", width-len(num)) + num
			}
			for _, s := range suffixes {
				out = append(out, prefix+num+s)
			}
		}
	}
	return out, nil
}
