package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

const dashboardPath = "../../deploy/grafana/dashboards/slurm-gpu-cluster.json"

// The core exporter's metrics the dashboard joins with (the catalog's
// names, docs/metrics.md).
var coreMetrics = map[string]bool{
	"gpu_utilization_ratio": true, "gpu_memory_used_bytes": true,
	"gpu_power_usage_watts": true, "gpu_slurm_job_info": true, "gpu_up": true,
}

type dashPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr       string `json:"expr"`
		RefID      string `json:"refId"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
}

type dashboard struct {
	Title         string      `json:"title"`
	UID           string      `json:"uid"`
	SchemaVersion int         `json:"schemaVersion"`
	Panels        []dashPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return d
}

var (
	varRef     = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)
	metricName = regexp.MustCompile(`\b((?:slurm|gpu)_[a-z0-9_]+)\b`)
)

// TestDashboardShape checks the JSON, the datasource variable, that every
// variable referenced is defined, and that every metric it queries exists:
// slurm_* in this package's catalog, gpu_* among the core exporter's names.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	if d.Title != "Slurm GPU cluster" || d.UID == "" || d.SchemaVersion < 38 {
		t.Errorf("title %q, uid %q, schemaVersion %d", d.Title, d.UID, d.SchemaVersion)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Name == "datasource" && (v.Type != "datasource" || string(v.Query) != `"prometheus"`) {
			t.Errorf("datasource variable: type %q query %s", v.Type, v.Query)
		}
	}
	if !vars["datasource"] || !vars["cluster"] || !vars["instance"] || !vars["job_id"] {
		t.Fatalf("variables %v: want datasource, cluster, instance and job_id", vars)
	}
	catalog := map[string]bool{}
	for _, m := range Metrics {
		catalog[m.Name] = true
	}
	checkRefs := func(where, s string) {
		for _, m := range varRef.FindAllStringSubmatch(s, -1) {
			if !vars[m[1]] && !strings.HasPrefix(m[1], "__") {
				t.Errorf("%s: variable $%s is not defined", where, m[1])
			}
		}
		for _, m := range metricName.FindAllStringSubmatch(s, -1) {
			if !catalog[m[1]] && !coreMetrics[m[1]] {
				t.Errorf("%s: metric %s is neither in slurm.Metrics nor a core metric", where, m[1])
			}
		}
	}
	for _, v := range d.Templating.List {
		checkRefs("variable "+v.Name, v.Definition)
	}
	ids := map[int]bool{}
	exprs := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
		}
		checkRefs("title of "+p.Title, p.Title)
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want uid ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %s: datasource not ${datasource}", p.Title, tg.RefID)
			}
			checkRefs("panel "+p.Title, tg.Expr)
		}
	}
	if exprs < 20 {
		t.Errorf("only %d queries", exprs)
	}
}

// substitute replaces dashboard variables with values promtool accepts.
func substitute(expr string, values map[string]string) string {
	return varRef.ReplaceAllStringFunc(expr, func(ref string) string {
		name := strings.Trim(ref, "${}")
		if v, ok := values[name]; ok {
			return v
		}
		return ref
	})
}

func requirePromtool(t *testing.T) string {
	t.Helper()
	return testenv.RequireTool(t, "promtool", "prometheus")
}

func runPromtool(t *testing.T, promtool string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestDashboardPromQL parses every query of the dashboard with promtool
// (as recording rules), variables replaced by what Grafana would send.
func TestDashboardPromQL(t *testing.T) {
	promtool := requirePromtool(t)
	d := loadDashboard(t)
	values := map[string]string{"cluster": ".*", "instance": ".*", "partition": ".*", "user": ".*", "job_id": ".*", "__rate_interval": "5m", "__interval": "1m"}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:panel%d_%s", p.ID, tg.RefID), Expr: substitute(tg.Expr, values)})
		}
	}
	file := map[string]any{"groups": []any{map[string]any{"name": "slurm-gpu-cluster-dashboard", "rules": rules}}}
	data, _ := json.Marshal(file) // JSON is YAML
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, promtool, "check", "rules", path)
}

// TestDashboardJoins evaluates the dashboard's join queries on a small
// fleet with promtool test rules: job 7 (alice) holds GPU-a and GPU-b,
// job 8 (bob) holds an idle GPU-c, job 9 (carol) shares GPU-a, GPU-d is
// busy but held by no job.
func TestDashboardJoins(t *testing.T) {
	promtool := requirePromtool(t)
	d := loadDashboard(t)
	query := func(title, ref string, values map[string]string) string {
		for _, p := range d.Panels {
			if p.Title != title {
				continue
			}
			for _, tg := range p.Targets {
				if ref == "" || tg.RefID == ref {
					return substitute(tg.Expr, values)
				}
			}
		}
		t.Fatalf("no panel %q target %q", title, ref)
		return ""
	}
	all := map[string]string{"cluster": ".*", "instance": ".*", "partition": ".*", "user": ".*"}
	job := func(id string) map[string]string {
		return map[string]string{"cluster": ".*", "instance": ".*", "partition": ".*", "user": ".*", "job_id": id}
	}

	series := []map[string]string{}
	add := func(s, v string) { series = append(series, map[string]string{"series": s, "values": v}) }
	info := func(node, gpu, uuid, jobID, user, account string) {
		add(`gpu_slurm_job_info{instance="`+node+`",gpu="`+gpu+`",uuid="`+uuid+`",job_id="`+jobID+`",user="`+user+`",account="`+account+`",partition="gpu"}`, "1x30")
	}
	dev := func(node, gpu, uuid, util, mem, power string) {
		l := `{instance="` + node + `",gpu="` + gpu + `",uuid="` + uuid + `"}`
		add("gpu_utilization_ratio"+l, util+"x30")
		add("gpu_memory_used_bytes"+l, mem+"x30")
		add("gpu_power_usage_watts"+l, power+"x30")
	}
	dev("n1", "0", "GPU-a", "0.9", "1000000000", "300")
	dev("n1", "1", "GPU-b", "0.5", "2000000000", "200")
	dev("n2", "0", "GPU-c", "0.01", "500000000", "60")
	dev("n2", "1", "GPU-d", "0.7", "0", "250")
	info("n1", "0", "GPU-a", "7", "alice", "physics")
	info("n1", "1", "GPU-b", "7", "alice", "physics")
	info("n2", "0", "GPU-c", "8", "bob", "chem")
	info("n1", "0", "GPU-a", "9", "carol", "bio")
	add(`slurm_gpus_allocated{user="alice",account="physics",partition="gpu",type="a100"}`, "2x30")

	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	type exprTest struct {
		Expr       string   `json:"expr"`
		EvalTime   string   `json:"eval_time"`
		ExpSamples []sample `json:"exp_samples"`
	}
	tests := []exprTest{
		{Expr: query("Mean GPU utilization", "", job("7")), ExpSamples: []sample{{"{}", 0.7}}},
		{Expr: query("GPU memory used", "", job("7")), ExpSamples: []sample{{"{}", 3e9}}},
		{Expr: query("GPU power", "", job("7")), ExpSamples: []sample{{"{}", 500}}},
		{Expr: query("GPUs held", "", job("9")), ExpSamples: []sample{{"{}", 1}}},
		{Expr: query("Allocated but idle GPUs", "", all), ExpSamples: []sample{{"{}", 1}}},
		{Expr: query("Per user: allocated vs busy", "B", all), ExpSamples: []sample{
			{`{user="alice"}`, 1.4}, {`{user="bob"}`, 0.01}, {`{user="carol"}`, 0.9}}},
		{Expr: query("Per user: allocated vs busy", "A", all), ExpSamples: []sample{{`{user="alice"}`, 2}}},
		{Expr: query("Memory used on allocated GPUs, per account", "", all), ExpSamples: []sample{
			{`{account="physics"}`, 3e9}, {`{account="chem"}`, 5e8}, {`{account="bio"}`, 1e9}}},
		{Expr: query("Utilization per GPU", "", job("7")), ExpSamples: []sample{
			{`{instance="n1",gpu="0",uuid="GPU-a",job_id="7",user="alice",account="physics",partition="gpu"}`, 0.9},
			{`{instance="n1",gpu="1",uuid="GPU-b",job_id="7",user="alice",account="physics",partition="gpu"}`, 0.5}}},
		{Expr: query("Allocated but idle GPUs (utilization < 5% over 15 min)", "", all), ExpSamples: []sample{
			{`{instance="n2",gpu="0",uuid="GPU-c",job_id="8",user="bob",account="chem",partition="gpu"}`, 0.01}}},
	}
	for i := range tests {
		tests[i].EvalTime = "20m"
		sort.Slice(tests[i].ExpSamples, func(a, b int) bool { return tests[i].ExpSamples[a].Labels < tests[i].ExpSamples[b].Labels })
	}
	file := map[string]any{
		"evaluation_interval": "1m",
		"tests":               []any{map[string]any{"interval": "1m", "input_series": series, "promql_expr_test": tests}},
	}
	data, _ := json.MarshalIndent(file, "", " ")
	path := filepath.Join(t.TempDir(), "dashboard-joins-test.yml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, promtool, "test", "rules", path)
}
