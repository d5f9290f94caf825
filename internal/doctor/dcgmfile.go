package doctor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxCheckFile bounds what --compat.check-file reads: the largest Grafana
// dashboards are a few MiB.
const maxCheckFile = 32 << 20

// dcgmName matches a dcgm-exporter metric or label name in a query.
var dcgmName = regexp.MustCompile(`\bDCGM_(?:FI|EXP)_[A-Z0-9_]+\b`)

// DCGMNamesInFile returns the dcgm-exporter names the queries of a Grafana
// dashboard (JSON: every "expr", "query" and "definition") or a Prometheus
// rules file (YAML: every rule's expr) use, sorted, each once.
func DCGMNamesInFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, maxCheckFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(body) > maxCheckFile {
		return nil, fmt.Errorf("%s: larger than %d MiB; not a dashboard or rules file", path, maxCheckFile>>20)
	}
	var queries []string
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' {
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, fmt.Errorf("%s: not valid JSON: %w", path, err)
		}
		queries = jsonQueries(doc, "", nil)
	} else {
		var rules struct {
			Groups []struct {
				Rules []struct {
					Expr string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(body, &rules); err != nil || len(rules.Groups) == 0 {
			return nil, fmt.Errorf("%s: neither a Grafana dashboard (JSON) nor a Prometheus rules file (YAML with groups)", path)
		}
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				queries = append(queries, r.Expr)
			}
		}
	}
	var names []string
	for _, q := range queries {
		names = append(names, dcgmName.FindAllString(q, -1)...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// jsonQueries collects the strings under the keys Grafana keeps queries in.
func jsonQueries(v any, key string, out []string) []string {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			out = jsonQueries(c, k, out)
		}
	case []any:
		for _, c := range x {
			out = jsonQueries(c, key, out)
		}
	case string:
		if key == "expr" || key == "query" || key == "definition" {
			out = append(out, x)
		}
	}
	return out
}

// DCGMFileName is one dcgm-exporter name a checked file uses.
type DCGMFileName struct {
	Name string `json:"name"`
	// Versions are the --compat.dcgm-version values that serve it; none
	// for a name gpuwatch serves under no version.
	Versions []string `json:"versions"`
	// Served: gpuwatch serves it with the flags given.
	Served bool `json:"served"`
	// Instead is the name the flags' version serves the same reading
	// under, when that is another name.
	Instead string `json:"instead,omitempty"`
}

// DCGMFile is the outcome of --compat.check-file.
type DCGMFile struct {
	Path    string
	Version string // --compat.dcgm-version
	DCGM    bool   // --compat includes dcgm
	Names   []DCGMFileName
	Err     error
}

// checkDCGMFile reports, for --compat.check-file, each dcgm-exporter name
// the file uses, its generation, and whether the flags serve it. A name
// not served fails the check (the file's panels or rules would be empty),
// but it is not needed by the flags: doctor's exit status is the host's.
func checkDCGMFile(env Env) []Result {
	f := env.DCGMFile
	if f == nil {
		return nil
	}
	check := "dcgm names in " + f.Path
	if f.Err != nil {
		return []Result{fail(check, f.Err.Error(), "give a Grafana dashboard JSON or a Prometheus rules file", true)}
	}
	if len(f.Names) == 0 {
		return []Result{skip(check, "uses no dcgm-exporter name")}
	}
	gens := map[string]bool{}
	for _, n := range f.Names {
		for _, v := range n.Versions {
			gens[v] = true
		}
	}
	var out []Result
	summary := fmt.Sprintf("%d names; gpuwatch serves dcgm-exporter %s names", len(f.Names), f.Version)
	if !f.DCGM {
		summary = fmt.Sprintf("%d names; --compat does not include dcgm, so none is served", len(f.Names))
	}
	out = append(out, ok(check, summary))
	for _, n := range f.Names {
		c := check + ": " + n.Name
		gen := "no dcgm-exporter version gpuwatch serves"
		if len(n.Versions) > 0 {
			gen = "dcgm-exporter " + strings.Join(n.Versions, ", ")
		}
		switch {
		case n.Served:
			out = append(out, ok(c, gen+"; served"))
		case !f.DCGM:
			out = append(out, fail(c, gen+"; not served", "add dcgm to --compat", false))
		case n.Instead != "":
			out = append(out, fail(c, gen+"; not served by "+f.Version, fmt.Sprintf("query %s instead (docs/dcgm-compat.md has the unit), or serve --compat.dcgm-version=%s", n.Instead, n.Versions[0]), false))
		case len(n.Versions) > 0:
			out = append(out, fail(c, gen+"; not served by "+f.Version, "serve --compat.dcgm-version="+n.Versions[0], false))
		default:
			out = append(out, fail(c, gen, "docs/dcgm-compat.md lists what gpuwatch serves and why some fields are not", false))
		}
	}
	return out
}
