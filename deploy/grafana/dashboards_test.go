// Package grafana holds the shipped Grafana dashboards (dashboards/*.json)
// and their checks; it has no Go code of its own.
package grafana

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/deploycheck"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// stableUIDs pins each dashboard's uid: links, bookmarks and alert
// annotations point at it, so it must never change.
var stableUIDs = map[string]string{
	"gpuwatch-fleet.json":    "gpuwatch-fleet",
	"gpuwatch-node.json":     "gpuwatch-node",
	"gpuwatch-owners.json":   "gpuwatch-owners",
	"gpuwatch-health.json":   "gpuwatch-health",
	"slurm-gpu-cluster.json": "gpuwatch-slurm-gpu-cluster",
}

func load(t *testing.T) ([]deploycheck.Dashboard, deploycheck.Catalog) {
	t.Helper()
	root := testenv.RepoRoot()
	ds, err := deploycheck.LoadDashboards(filepath.Join(root, "deploy", "grafana", "dashboards"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := deploycheck.Load(deploycheck.RecordingRules(root))
	if err != nil {
		t.Fatal(err)
	}
	return ds, c
}

func TestDashboardsAreTheShippedSet(t *testing.T) {
	ds, _ := load(t)
	seen := map[string]bool{}
	for _, d := range ds {
		want, ok := stableUIDs[d.File]
		if !ok {
			t.Errorf("%s: not in stableUIDs; add it with its uid", d.File)
			continue
		}
		if d.UID != want {
			t.Errorf("%s: uid %q, want %q (uids are stable)", d.File, d.UID, want)
		}
		if seen[d.UID] {
			t.Errorf("uid %s used twice", d.UID)
		}
		seen[d.UID] = true
		if d.Title == "" || d.SchemaVersion < 38 {
			t.Errorf("%s: title %q schemaVersion %d", d.File, d.Title, d.SchemaVersion)
		}
	}
	if len(seen) != len(stableUIDs) {
		t.Errorf("%d dashboards, want %d", len(seen), len(stableUIDs))
	}
}

// TestDashboardConventions: a datasource variable every query uses; the
// cluster and instance filters on gpuwatch's own dashboards; a unit and an
// "n/a" for absent data on every panel, and no query that pads absent data
// with 0; every variable a query uses is defined; the grid is sane.
func TestDashboardConventions(t *testing.T) {
	ds, _ := load(t)
	for _, d := range ds {
		t.Run(d.UID, func(t *testing.T) {
			v, ok := d.Variable("datasource")
			if !ok || v.Type != "datasource" || string(v.Query) != `"prometheus"` {
				t.Errorf("datasource variable: %+v", v)
			}
			if strings.HasPrefix(d.UID, "gpuwatch-") {
				for _, name := range []string{"cluster", "instance"} {
					v, ok := d.Variable(name)
					if d.UID == "gpuwatch-node" && name == "instance" {
						// One host's view: no All, so that Grafana opens it on
						// the first node instead of every node's GPUs at once.
						if !ok || !v.IsFilter() || v.IncludeAll || len(v.Current) > 2 {
							t.Errorf("variable %s: %+v, want a multi-value query variable without All and no saved choice", name, v)
						}
						continue
					}
					if !ok || !v.IsFilter() || v.AllValue != deploycheck.AllValue {
						t.Errorf("variable %s: %+v, want a multi-value query variable with All = %s", name, v, deploycheck.AllValue)
					}
				}
			}
			defined := map[string]bool{}
			for _, v := range d.Templating.List {
				defined[v.Name] = true
				if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
					t.Errorf("variable %s: datasource %+v, want ${datasource}", v.Name, v.Datasource)
				}
			}
			ids, titles := map[int]bool{}, map[string]bool{}
			for _, p := range d.AllPanels() {
				if ids[p.ID] || titles[p.Title] {
					t.Errorf("panel id %d or title %q used twice", p.ID, p.Title)
				}
				ids[p.ID], titles[p.Title] = true, true
				if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
					t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
				}
				if p.Type == "row" {
					continue
				}
				if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q: datasource %+v, want ${datasource}", p.Title, p.Datasource)
				}
				if p.FieldConfig.Defaults.Unit == "" {
					t.Errorf("panel %q: no unit", p.Title)
				}
				if strings.HasPrefix(d.UID, "gpuwatch-") && p.FieldConfig.Defaults.NoValue != "n/a" {
					t.Errorf("panel %q: noValue %q, want n/a", p.Title, p.FieldConfig.Defaults.NoValue)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q: no query", p.Title)
				}
				for _, tg := range p.Targets {
					if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
						t.Errorf("panel %q %s: datasource %+v", p.Title, tg.RefID, tg.Datasource)
					}
					if strings.HasPrefix(d.UID, "gpuwatch-") && deploycheck.ContainsZeroFill(tg.Expr) {
						t.Errorf("panel %q %s pads absent data with 0: %s", p.Title, tg.RefID, tg.Expr)
					}
				}
			}
			for _, q := range d.Queries() {
				for _, name := range deploycheck.Variables(q.Expr) {
					if !defined[name] && !strings.HasPrefix(name, "__") {
						t.Errorf("%s: $%s is not defined", q, name)
					}
				}
			}
		})
	}
}

// TestDashboardPromQL parses every query, variables replaced as Grafana
// sends them, with Prometheus' own parser, and checks that it names only
// metrics that exist.
func TestDashboardPromQL(t *testing.T) {
	ds, c := load(t)
	n := 0
	for _, d := range ds {
		for _, q := range d.Queries() {
			n++
			_, errs := c.CheckNames(deploycheck.Substitute(q.Expr, d.AllValues()))
			for _, err := range errs {
				t.Errorf("%s: %v\n  %s", q, err, q.Expr)
			}
		}
	}
	if n < 100 {
		t.Errorf("only %d queries in all dashboards", n)
	}
}

// filterExemptions are the panels that cannot apply a filter variable, and
// why. Every other panel applies every filter.
var filterExemptions = map[string]map[string]map[string]string{
	"gpuwatch-node": {
		"CPU busy":              {"gpu": "host metric (node_exporter), no GPU"},
		"Host memory available": {"gpu": "host metric (node_exporter), no GPU"},
		"Load (1 min)":          {"gpu": "host metric (node_exporter), no GPU"},
		"Collectors":            {"gpu": "the exporter's own health, per collector"},
		"Driver":                {"gpu": "the driver library, one per node"},
	},
	"gpuwatch-slurm-gpu-cluster": {
		"GPUs free":               {"user": "idle GPUs belong to no user"},
		"Slurm collector up":      {"partition": "the collector's own health", "user": "the collector's own health"},
		"Pending jobs by reason":  {"user": "slurm_jobs_pending has no user (sdiag-like summary per reason)"},
		"Nodes by state":          {"user": "nodes belong to no user"},
		"Partition GPUs by state": {"user": "partition totals belong to no user"},
		"Scheduler cycle (sdiag)": {"partition": "scheduler-wide", "user": "scheduler-wide"},
	},
}

// TestEveryFilterReachesEveryPanel: every filter variable ($cluster,
// $instance, $gpu, $partition, $user) is used by every panel but the listed
// exemptions, and applied by every selector of a metric that has its label,
// so that no panel silently shows the whole fleet.
func TestEveryFilterReachesEveryPanel(t *testing.T) {
	ds, c := load(t)
	for _, d := range ds {
		exempt := filterExemptions[d.UID]
		for title, vars := range d.PanelsIgnoringFilters() {
			for _, v := range vars {
				if _, ok := exempt[title][v]; !ok {
					t.Errorf("%s / %q ignores $%s", d.UID, title, v)
				}
			}
		}
		for title, vars := range exempt {
			for v := range vars {
				if !slices.Contains(d.PanelsIgnoringFilters()[title], v) {
					t.Errorf("%s / %q: exempt from $%s but uses it, or no such panel: remove the exemption", d.UID, title, v)
				}
			}
		}
		for _, p := range d.UnfilteredSelectors(c) {
			t.Error(p)
		}
	}
}
