package exporter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMetricFilterErrors(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string // substrings of the error
	}{
		{"unknown key", "enable: [gpu_up]\ndisabled: [gpu_info]\n", []string{"m.yml", "line 2", "disabled", "valid keys: enable, disable"}},
		{"unknown name", "disable:\n  - gpu_up\n  - gpu_power_watts\n", []string{"m.yml:3", `"gpu_power_watts" matches no metric`, "gpu_power_usage_watts"}},
		{"typo", "enable: [gpu_temprature_celsius]\n", []string{"m.yml:1", "did you mean gpu_temperature_celsius"}},
		{"glob matching nothing", "enable: [\"gpu_nvlnk_*\"]\n", []string{"m.yml:1", `"gpu_nvlnk_*" matches no metric`}},
		{"bad glob", "enable: [\"gpu_[\"]\n", []string{"m.yml:1", "bad glob"}},
		{"not a list", "enable: gpu_up\n", []string{"m.yml:1", "must be a list"}},
		{"not strings", "enable: [[a]]\n", []string{"m.yml:1", "must be strings"}},
		{"not a mapping", "- gpu_up\n", []string{"m.yml"}},
		{"syntax", "enable: [gpu_up\n", []string{"m.yml"}},
		{"second document", "enable: [gpu_up]\n---\ndisable: [no_such_metric]\n", []string{"m.yml", "only one YAML document"}},
		{"always-on named", "disable:\n  - gpu_power_usage_watts\n  - gpu_up\n", []string{"m.yml:3", "gpu_up is always exported", "cannot be disabled"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseMetricFilter("m.yml", []byte(c.doc))
			if err == nil {
				t.Fatalf("no error for %q", c.doc)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestLoadMetricFilter(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "metrics.yml")
	doc := "# comment\ndisable: [\"*\"]\nenable:\n  - gpu_up\n  - \"gpu_power_*\"\n"
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := LoadMetricFilter(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range catalog {
		want := m.Collector == CollectorExporter || strings.HasPrefix(m.Name, "gpu_power_")
		if got := f.enabled(m); got != want {
			t.Errorf("%s enabled=%v, want %v (allow-list)", m.Name, got, want)
		}
	}
	everything, err := ParseMetricFilter("all.yml", []byte("disable: [\"*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range catalog {
		if want := m.Collector == CollectorExporter; everything.enabled(m) != want {
			t.Errorf("disable [*]: %s enabled=%v, want %v (the exporter's own series stay)", m.Name, !want, want)
		}
	}
	for _, empty := range []string{"", "enable:\n", "# nothing\n"} {
		f, err := ParseMetricFilter("e.yml", []byte(empty))
		if err != nil {
			t.Errorf("%q: %v", empty, err)
			continue
		}
		for _, m := range catalog {
			if f.enabled(m) != m.Default {
				t.Errorf("%q changed %s", empty, m.Name)
			}
		}
	}
	if _, err := LoadMetricFilter(filepath.Join(dir, "missing.yml")); err == nil || !strings.Contains(err.Error(), "missing.yml") {
		t.Errorf("missing file: err = %v", err)
	}
}
