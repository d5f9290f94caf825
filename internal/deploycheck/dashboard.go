package deploycheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Ref is a Grafana datasource reference.
type Ref struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Target is one query of a panel.
type Target struct {
	Expr       string `json:"expr"`
	RefID      string `json:"refId"`
	Datasource *Ref   `json:"datasource"`
	Instant    bool   `json:"instant"`
}

// Panel is a dashboard panel; rows carry their collapsed panels.
type Panel struct {
	ID          int      `json:"id"`
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Datasource  *Ref     `json:"datasource"`
	Targets     []Target `json:"targets"`
	Panels      []Panel  `json:"panels"`
	GridPos     struct{ X, Y, W, H int }
	FieldConfig struct {
		Defaults struct {
			Unit    string `json:"unit"`
			NoValue string `json:"noValue"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// Variable is a templating variable.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *Ref            `json:"datasource"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
	// Current is the saved choice ({} when Grafana picks the first value).
	Current json.RawMessage `json:"current"`
}

// IsFilter reports whether the variable filters the whole dashboard: a
// multi-value query variable with All. A single-pick variable (a Slurm
// job id) is a drill-down for its own row instead.
func (v Variable) IsFilter() bool {
	// instance is a filter even without All: the node dashboard opens on one
	// node rather than the fleet, and every panel must still apply it.
	return v.Type == "query" && v.Multi && (v.IncludeAll || v.Name == "instance")
}

// Dashboard is the part of a Grafana dashboard the checks read.
type Dashboard struct {
	File          string `json:"-"`
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Panels        []Panel
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// LoadDashboards parses every *.json in dir.
func LoadDashboards(dir string) ([]Dashboard, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no dashboards", dir)
	}
	sort.Strings(files)
	var out []Dashboard
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d Dashboard
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		d.File = filepath.Base(f)
		out = append(out, d)
	}
	return out, nil
}

// AllPanels returns the panels, those inside collapsed rows included.
func (d Dashboard) AllPanels() []Panel {
	var out []Panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// Variable returns the variable named name.
func (d Dashboard) Variable(name string) (Variable, bool) {
	for _, v := range d.Templating.List {
		if v.Name == name {
			return v, true
		}
	}
	return Variable{}, false
}

// Query is one PromQL expression of a dashboard and where it is.
type Query struct {
	Dashboard string // uid
	Panel     string // title, or "variable NAME"
	RefID     string
	Expr      string
}

func (q Query) String() string {
	return fmt.Sprintf("%s / %q %s", q.Dashboard, q.Panel, q.RefID)
}

// labelValues matches Grafana's label_values(SELECTOR, LABEL) and
// query_result(EXPR) variable queries.
var (
	labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)
	queryResult = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)
)

// Queries returns every PromQL expression of the dashboard: panel targets
// and the selectors inside variable queries.
func (d Dashboard) Queries() []Query {
	var out []Query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		def := v.Definition
		for _, re := range []*regexp.Regexp{labelValues, queryResult} {
			if m := re.FindStringSubmatch(def); m != nil {
				out = append(out, Query{d.UID, "variable " + v.Name, "", m[1]})
			}
		}
	}
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			out = append(out, Query{d.UID, p.Title, t.RefID, t.Expr})
		}
	}
	return out
}

// UnfilteredSelectors returns, for every panel query, each selector of a
// metric that carries a filter variable's label but does not filter on it:
// the filter would be ignored by that panel. Metrics the catalog lacks are
// CheckNames' business and skipped here.
func (d Dashboard) UnfilteredSelectors(c Catalog) []string {
	sentinels := map[string]string{}
	var filters []Variable
	for _, v := range d.Templating.List {
		if v.IsFilter() {
			filters = append(filters, v)
			sentinels[v.Name] = "VAR_" + v.Name + "_VAR"
		}
	}
	var problems []string
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			sels, err := Parse(Substitute(t.Expr, sentinels))
			if err != nil {
				continue
			}
			for _, s := range sels {
				info, ok := c[s.Metric]
				if !ok {
					continue
				}
				for _, v := range filters {
					if info.HasLabel(v.Name) && !hasVariable(s.Matcher(v.Name), sentinels[v.Name]) {
						problems = append(problems, fmt.Sprintf("%s / %q %s: %s has a %s label but ignores $%s",
							d.UID, p.Title, t.RefID, s.Metric, v.Name, v.Name))
					}
				}
			}
		}
	}
	return problems
}

// PanelsIgnoringFilters maps the title of each panel that does not use
// every filter variable in its queries to the variables it leaves out.
func (d Dashboard) PanelsIgnoringFilters() map[string][]string {
	out := map[string][]string{}
	for _, p := range d.AllPanels() {
		if p.Type == "row" {
			continue
		}
		used := map[string]bool{}
		for _, t := range p.Targets {
			for _, v := range Variables(t.Expr) {
				used[v] = true
			}
		}
		for _, v := range d.Templating.List {
			if v.IsFilter() && !used[v.Name] {
				out[p.Title] = append(out[p.Title], v.Name)
			}
		}
	}
	return out
}

// AllValues maps every variable of the dashboard to what Grafana sends when
// it is set to All (or, for a single-pick variable, any value).
func (d Dashboard) AllValues() map[string]string {
	out := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type == "query" || v.Type == "custom" {
			out[v.Name] = AllValue
		}
	}
	return out
}

// ContainsZeroFill reports whether an expression pads absent data with a
// zero, which the dashboards must not do (absent data shows as n/a).
func ContainsZeroFill(expr string) bool {
	compact := strings.Join(strings.Fields(expr), "")
	return strings.Contains(compact, "vector(0)")
}
