package exporter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// MetricFilter turns single metrics on or off, from the --metrics.config
// file:
//
//	# every metric matching a pattern in disable is turned off, then every
//	# metric matching a pattern in enable is turned on: enable wins, so
//	# "disable: ['*']" plus an enable list is an allow-list.
//	disable: ["gpu_nvlink_*"]
//	enable:  ["gpu_nvlink_up", "gpu_bar1_memory_*"]
//
// Patterns are metric names or path.Match globs. A pattern that matches no
// catalog metric is an error, so a typo never silently does nothing. The
// exporter's own series (gpu_up, gpuwatch_*) cannot be disabled: a glob
// leaves them on, and naming one in disable is an error.
type MetricFilter struct {
	Enable  []string
	Disable []string
}

// filterKeys are the keys of a --metrics.config file.
var filterKeys = []string{"enable", "disable"}

// filterFile is the YAML schema of --metrics.config.
type filterFile struct {
	Enable  yaml.Node `yaml:"enable"`
	Disable yaml.Node `yaml:"disable"`
}

// LoadMetricFilter reads and validates a --metrics.config file.
func LoadMetricFilter(file string) (*MetricFilter, error) {
	data, err := configfile.Read(file)
	if err != nil {
		return nil, err
	}
	return ParseMetricFilter(file, data)
}

// ParseMetricFilter validates a --metrics.config document; name is used in
// error messages.
func ParseMetricFilter(name string, data []byte) (*MetricFilter, error) {
	var ff filterFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&ff); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %s", name, configfile.YAMLError(err, func(string) []string { return filterKeys }))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: only one YAML document is allowed (found a second after ---)", name)
	}
	f := &MetricFilter{}
	var err error
	if f.Enable, err = patternList(name, "enable", &ff.Enable); err != nil {
		return nil, err
	}
	if f.Disable, err = patternList(name, "disable", &ff.Disable); err != nil {
		return nil, err
	}
	for i, p := range f.Disable {
		if m := alwaysOn(p); m != "" {
			return nil, fmt.Errorf("%s:%d: disable: %s is always exported (with gpu_up and the other gpuwatch_* series a scrape must carry) and cannot be disabled", name, ff.Disable.Content[i].Line, m)
		}
	}
	return f, nil
}

// patternList validates one key's list, naming the line of a bad entry.
func patternList(file, key string, n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case 0:
		return nil, nil // key absent
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil, nil // "enable:" with nothing after it
		}
		return nil, fmt.Errorf("%s:%d: %s must be a list of metric names or globs, e.g. %s: [\"gpu_nvlink_*\"]", file, n.Line, key, key)
	case yaml.SequenceNode:
	default:
		return nil, fmt.Errorf("%s:%d: %s must be a list of metric names or globs", file, n.Line, key)
	}
	var out []string
	for _, item := range n.Content {
		if item.Kind != yaml.ScalarNode || item.Tag != "!!str" {
			return nil, fmt.Errorf("%s:%d: %s entries must be strings (metric names or globs)", file, item.Line, key)
		}
		if err := checkPattern(item.Value); err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", file, item.Line, key, err)
		}
		out = append(out, item.Value)
	}
	return out, nil
}

// alwaysOn returns the name of the always-on metric a disable pattern
// names exactly (not by a glob, which just leaves it on), or "".
func alwaysOn(p string) string {
	for _, m := range catalog {
		if m.Collector == CollectorExporter && m.Name == p {
			return m.Name
		}
	}
	return ""
}

// checkPattern fails when a pattern is malformed or matches no metric, and
// then suggests the closest names.
func checkPattern(p string) error {
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("bad glob %q: %w", p, err)
	}
	for _, m := range catalog {
		if ok, _ := path.Match(p, m.Name); ok {
			return nil
		}
	}
	msg := fmt.Sprintf("%q matches no metric", p)
	if s := suggest(p); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, ", ") + "?"
	}
	return errors.New(msg + " (`gpuwatch metrics` lists them all)")
}

// enabled applies the filter to one metric; a nil filter keeps the default.
//
// The exporter's own series (gpu_up, gpuwatch_*) are always on: alerts on
// a GPU being down or a collector failing must not vanish with a broad
// disable glob such as "*".
func (f *MetricFilter) enabled(m *metricDef) bool {
	on := m.Default
	if f == nil || m.Collector == CollectorExporter {
		return on
	}
	if matchAny(f.Disable, m.Name) {
		on = false
	}
	if matchAny(f.Enable, m.Name) {
		on = true
	}
	return on
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// suggest returns up to three catalog names close to a mistyped one: by
// edit distance, and names sharing its longest word.
func suggest(p string) []string {
	type cand struct {
		name string
		dist int
	}
	plain := strings.NewReplacer("*", "", "?", "", "[", "", "]", "").Replace(p)
	var cands []cand
	for _, m := range catalog {
		d := levenshtein(plain, m.Name)
		if d <= len(m.Name)/3 || sharesWord(plain, m.Name) {
			cands = append(cands, cand{m.Name, d})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].dist < cands[j].dist })
	var out []string
	for i := 0; i < len(cands) && i < 3; i++ {
		out = append(out, cands[i].name)
	}
	return out
}

// sharesWord reports whether the longest distinctive word of p (split on
// "_") occurs in name: "gpu_power_watts" suggests gpu_power_usage_watts.
func sharesWord(p, name string) bool {
	longest := ""
	for w := range strings.SplitSeq(p, "_") {
		if w != "gpu" && w != "gpuwatch" && w != "total" && len(w) > len(longest) {
			longest = w
		}
	}
	return len(longest) >= 4 && strings.Contains(name, longest)
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
