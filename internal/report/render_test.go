package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"
)

func sampleReport(owner string) *Report {
	row := Row{Owner: map[string]string{"compose_project": "lab", "compose_service": owner}, AllocatedGPUHours: 24, UnmeasuredGPUHours: 24}
	r := &Report{From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), Step: "5m",
		By: "compose_service", IdleBelow: 0.05, Labels: []string{"compose_project", "compose_service"}, Rows: []Row{row},
		Totals: row, Fleet: Fleet{GPUs: 1, GPUsWithoutUtilization: 1}, Sources: "raw series", Server: "http://prometheus:9090",
		Notes: []string{"the server answered NaN for {compose_service=\"" + owner + "\"}: shown as n/a"}}
	return r
}

// A label value with terminal escapes, NUL and HTML reaches no terminal,
// Markdown renderer or browser as such.
func TestHostileOwnerNamesAreInert(t *testing.T) {
	hostile := "svc\x00nul\x1b[31mred\x1b]0;owned\x07\u009b2J<script>alert(1)</script>*bold*|cell\u202eevil\xff"
	for _, format := range []string{"table", "markdown", "html"} {
		var b bytes.Buffer
		if err := Write(&b, sampleReport(hostile), format); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		out := b.String()
		for _, r := range out {
			if (unicode.IsControl(r) && r != '\n' && r != '\t') || r == '\u202e' {
				t.Errorf("%s: control character %U in the output:\n%q", format, r, out)
				break
			}
		}
		if format != "table" && strings.Contains(out, "<script>alert") {
			t.Errorf("%s: raw <script> in the output:\n%s", format, out)
		}
		if format == "markdown" && (strings.Contains(out, "*bold*") || !strings.Contains(out, `\*bold\*\|cell`)) {
			t.Errorf("markdown: emphasis or a cell break from a label value:\n%s", out)
		}
		shown := "svc\uFFFDnul\uFFFD[31mred"
		if format == "markdown" {
			shown = "svc\uFFFDnul\uFFFD\\[31mred"
		}
		if !strings.Contains(out, shown) {
			t.Errorf("%s: the name is not shown with its controls replaced:\n%q", format, out)
		}
	}
}

// Absent figures are n/a for people and null in JSON, never 0; every
// figure's title and JSON/CSV name says per GPU or summed.
func TestAbsentIsNotZeroAndFiguresSayPerWhat(t *testing.T) {
	r := sampleReport("notebook")
	var table, js, csvOut bytes.Buffer
	for format, b := range map[string]*bytes.Buffer{"table": &table, "json": &js, "csv": &csvOut} {
		if err := Write(b, r, format); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
	}
	for _, title := range []string{"mean util % per GPU", "p95 util % per GPU", "peak mem GiB summed", "mean mem GiB summed", "energy kWh summed", "GPU-h no util reading"} {
		if !strings.Contains(table.String(), title) {
			t.Errorf("table: no column %q:\n%s", title, table.String())
		}
	}
	if fields := strings.Fields(strings.Split(table.String(), "\n")[2]); strings.Join(fields, " ") != "lab notebook 24.0 n/a n/a n/a n/a n/a n/a 0.0 24.0" {
		t.Errorf("table: absent figures not shown as n/a:\n%s", table.String())
	}
	if !strings.Contains(table.String(), "Fleet: 1 GPUs (1 without a utilization reading), mean utilization per GPU n/a") {
		t.Errorf("table: fleet line:\n%s", table.String())
	}
	var decoded struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"mean_utilization_per_gpu", "p95_utilization_per_gpu", "peak_memory_bytes_summed", "energy_kwh_summed"} {
		v, ok := decoded.Rows[0][field]
		if !ok || v != nil {
			t.Errorf("json: %s = %v (present %v), want null", field, v, ok)
		}
	}
	lines := strings.Split(strings.TrimSpace(csvOut.String()), "\n")
	if want := "compose_project,compose_service,allocated_gpu_hours,used_gpu_hours,mean_utilization_per_gpu,p95_utilization_per_gpu,peak_memory_bytes_summed,mean_memory_bytes_summed,energy_kwh_summed,idle_allocated_gpu_hours,unmeasured_gpu_hours"; lines[0] != want {
		t.Errorf("csv header %q, want %q", lines[0], want)
	}
	if lines[1] != "lab,notebook,24,,,,,,,0,24" {
		t.Errorf("csv row %q: absent figures must be empty cells", lines[1])
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"trainer-0": "trainer-0", "a\x1b[2Jb": "a\uFFFD[2Jb", "\x00": "\uFFFD", "x\u0085y": "x\uFFFDy", "\x7f": "\uFFFD",
		"bad\xffutf8": "bad\uFFFDutf8", "ünïcode 名前": "ünïcode 名前", "rtl\u202e": "rtl\uFFFD",
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
