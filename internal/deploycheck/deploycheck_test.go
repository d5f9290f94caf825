package deploycheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeRecording(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "recording.yml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCatalogNamesEverySource(t *testing.T) {
	c, err := Load(writeRecording(t, "groups:\n  - name: g\n    rules:\n      - record: user:mem:sum\n        expr: sum by (cluster, user) (gpu_process_memory_used_bytes)\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, origin := range map[string]Origin{
		"gpu_up": FromGpuwatch, "slurm_jobs": FromGpuwatch, "node_load1": FromNodeExporter,
		"up": FromPrometheus, "user:mem:sum": FromRecording,
	} {
		if c[name].Origin != origin {
			t.Errorf("%s: origin %q, want %q", name, c[name].Origin, origin)
		}
	}
	if rec := c["user:mem:sum"]; !rec.HasLabel("user") || rec.HasLabel("instance") {
		t.Errorf("recorded labels %v, want the grouping (cluster, user)", rec.Labels)
	}
	if up := c["gpu_up"]; !up.HasLabel("uuid") || !up.HasLabel("instance") || !up.HasLabel("cluster") {
		t.Errorf("gpu_up labels %v: want its own and the target labels", up.Labels)
	}
}

func TestPendingNameInTheCatalogFails(t *testing.T) {
	PendingMetrics["gpu_up"] = []string{"gpu", "uuid"}
	defer delete(PendingMetrics, "gpu_up")
	_, err := Load(writeRecording(t, "groups: []\n"))
	if err == nil || !strings.Contains(err.Error(), "gpu_up is in gpuwatch's catalog now") {
		t.Errorf("err = %v", err)
	}
}

func TestCheckNames(t *testing.T) {
	c, err := Load(writeRecording(t, "groups: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	for expr, want := range map[string]string{
		`sum by (gpu) (rate(gpu_energy_joules_total[5m]))`: "",
		`gpu_utilisation_ratio`:                            "metric gpu_utilisation_ratio exists neither",
		`{__name__=~"gpu_.*"}`:                             "a selector without a metric name",
		`sum(gpu_up`:                                       "does not parse",
	} {
		_, errs := c.CheckNames(expr)
		switch {
		case want == "" && len(errs) > 0:
			t.Errorf("%s: %v", expr, errs)
		case want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), want)):
			t.Errorf("%s: %v, want %q", expr, errs, want)
		}
	}
}

func TestSubstitute(t *testing.T) {
	got := Substitute(`rate(x{a=~"$a",b=~"${b}",c=~"[[c]]"}[$__rate_interval]) $unknown`, map[string]string{"a": ".*", "b": "1", "c": "2"})
	if want := `rate(x{a=~".*",b=~"1",c=~"2"}[1m]) $unknown`; got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestUnfilteredSelectorsAndPanelsIgnoringFilters(t *testing.T) {
	c, err := Load(writeRecording(t, "groups:\n  - name: g\n    rules:\n      - record: user:mem:sum\n        expr: sum by (user) (gpu_process_memory_used_bytes)\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := Dashboard{UID: "d"}
	d.Templating.List = []Variable{
		{Name: "instance", Type: "query", Multi: true, IncludeAll: true},
		{Name: "job_id", Type: "query"}, // a drill-down, not a filter
	}
	d.Panels = []Panel{
		{Title: "good", Targets: []Target{{RefID: "A", Expr: `gpu_up{instance=~"$instance"} * on(uuid) gpu_slurm_job_info{instance=~"$instance",job_id="$job_id"}`}}},
		{Title: "join forgets", Targets: []Target{{RefID: "A", Expr: `gpu_up{instance=~"$instance"} * on(uuid) gpu_slurm_job_info`}}},
		// A recorded series summed over every instance cannot filter by one.
		{Title: "no filter", Targets: []Target{{RefID: "A", Expr: `user:mem:sum`}}},
	}
	got := d.UnfilteredSelectors(c)
	if len(got) != 1 || !strings.Contains(got[0], `"join forgets" A: gpu_slurm_job_info has a instance label but ignores $instance`) {
		t.Errorf("UnfilteredSelectors = %q", got)
	}
	ignoring := d.PanelsIgnoringFilters()
	if len(ignoring) != 1 || len(ignoring["no filter"]) != 1 || ignoring["no filter"][0] != "instance" {
		t.Errorf("PanelsIgnoringFilters = %v", ignoring)
	}
}
