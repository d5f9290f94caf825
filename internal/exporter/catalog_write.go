package exporter

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// CatalogOption changes what WriteCatalog shows.
type CatalogOption func(*catalogView)

type catalogView struct {
	filter    *MetricFilter
	hasFilter bool
	extra     []Metric
}

// WithExtraMetrics lists metrics that collectors outside this package
// export (the Slurm cluster collector), so that `gpuwatch metrics` and
// docs/metrics.md cover everything gpuwatch can produce. Their on/off state
// is their Default: --metrics.config does not apply to them.
func WithExtraMetrics(ms ...Metric) CatalogOption {
	return func(v *catalogView) { v.extra = append(v.extra, ms...) }
}

// row is one metric as the writers show it.
type row struct {
	*Metric
	on bool
}

// rows is every metric in display order: the catalog, then the extras.
func (v *catalogView) rows() []row {
	out := make([]row, 0, len(catalog)+len(v.extra))
	for _, m := range catalog {
		if m.Compat != "" {
			continue // compat names are documented in docs/dcgm-compat.md
		}
		out = append(out, row{&m.Metric, v.on(m)})
	}
	for i := range v.extra {
		out = append(out, row{&v.extra[i], v.extra[i].Default})
	}
	return out
}

// groups is every collector group in display order.
func (v *catalogView) groups() []string {
	groups := append([]string{CollectorExporter}, snapshot.AllGroups...)
	for _, m := range v.extra {
		if !slices.Contains(groups, m.Collector) {
			groups = append(groups, m.Collector)
		}
	}
	return groups
}

// WithMetricFilter shows whether each metric is enabled under the filter
// (the effect of a --metrics.config) instead of its default.
func WithMetricFilter(f *MetricFilter) CatalogOption {
	return func(v *catalogView) { v.filter, v.hasFilter = f, true }
}

// CatalogFormats are the formats WriteCatalog accepts.
var CatalogFormats = []string{"table", "wide", "markdown", "json"}

// WriteCatalog writes every metric in the catalog: "table" (name, default
// and help, cut to fit a 100-column terminal), "wide" (every
// column, unabridged), "markdown" (docs/metrics.md) or "json".
func WriteCatalog(w io.Writer, format string, opts ...CatalogOption) error {
	var v catalogView
	for _, o := range opts {
		o(&v)
	}
	switch format {
	case "table":
		return v.writeNarrowTable(w)
	case "wide":
		return v.writeTable(w)
	case "markdown":
		return v.writeMarkdown(w)
	case "json":
		return v.writeJSON(w)
	default:
		return fmt.Errorf("unknown catalog format %q (use one of %s)", format, strings.Join(CatalogFormats, ", "))
	}
}

// on is the state shown in the default/enabled column.
func (v *catalogView) on(m *metricDef) bool {
	if v.hasFilter {
		return v.filter.enabled(m)
	}
	return m.Default
}

func (v *catalogView) stateColumn() string {
	if v.hasFilter {
		return "enabled"
	}
	return "default"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func (v *catalogView) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tTYPE\tUNIT\tLABELS\tCOLLECTOR\t%s\tSOURCE\tHELP\n", strings.ToUpper(v.stateColumn()))
	for _, r := range v.rows() {
		unit := r.Unit
		if unit == "" {
			unit = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Name, r.Type, unit, r.allLabels(","), r.Collector, onOff(r.on), r.Source, r.Help)
	}
	return tw.Flush()
}

// tableWidth is the terminal width the default table fits.
const tableWidth = 100

// writeNarrowTable writes name, default and the whole help, wrapped in its
// column so that every line fits tableWidth columns (the name's suffix says
// type and unit); "wide" adds the other columns on one long line each.
func (v *catalogView) writeNarrowTable(w io.Writer) error {
	rows := v.rows()
	state := strings.ToUpper(v.stateColumn())
	nameW := len("NAME")
	for _, r := range rows {
		nameW = max(nameW, len(r.Name))
	}
	helpW := max(tableWidth-nameW-len(state)-2*2, 20)
	var b strings.Builder
	row := func(name, on, help string) {
		for i, l := range wrapWords(help, helpW) {
			if i > 0 {
				name, on = "", ""
			}
			fmt.Fprintf(&b, "%-*s  %-*s  %s\n", nameW, name, len(state), on, l)
		}
	}
	row("NAME", state, "HELP")
	for _, r := range rows {
		row(r.Name, onOff(r.on), r.Help)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrapWords breaks s into lines of at most width characters at spaces; a
// word longer than width gets a line of its own.
func wrapWords(s string, width int) []string {
	var lines []string
	var cur strings.Builder
	for word := range strings.FieldsSeq(s) {
		if cur.Len() > 0 && utf8.RuneCountInString(cur.String())+1+utf8.RuneCountInString(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	return append(lines, cur.String())
}

func (v *catalogView) writeJSON(w io.Writer) error {
	type entry struct {
		Metric
		Enabled *bool `json:"enabled,omitempty"`
	}
	rows := v.rows()
	out := make([]entry, len(rows))
	for i, r := range rows {
		out[i].Metric = *r.Metric
		if out[i].Labels == nil {
			out[i].Labels = []string{}
		}
		if v.hasFilter {
			on := r.on
			out[i].Enabled = &on
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// mdEscape keeps a cell inside its markdown table column.
var mdEscape = strings.NewReplacer("|", `\|`, "\n", " ")

func (v *catalogView) writeMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# gpuwatch metrics\n\n")
	b.WriteString("<!-- Generated from internal/exporter/catalog.go and internal/slurm/metrics.go; do not edit.\n")
	b.WriteString("     Regenerate: go test ./cmd/gpuwatch -run TestMetricsDoc -update -->\n\n")
	b.WriteString("Every metric gpuwatch can export, by collector. `gpuwatch metrics` prints the same list.\n\n")
	b.WriteString("- Device series carry `gpu` (the NVML index) and `uuid`; descriptive facts are on `gpu_info`, joined in PromQL:\n")
	b.WriteString("  `gpu_power_usage_watts * on(gpu, uuid) group_left(name) gpu_info`.\n")
	b.WriteString("- Values are in base units: bytes, seconds, joules, degrees Celsius, watts, hertz, and ratios from 0 to 1.\n")
	b.WriteString("- A reading the GPU does not support produces no series (never a fake 0). A GPU that stops answering\n")
	b.WriteString("  has `gpu_up 0` and no other series.\n")
	b.WriteString("- A collector is turned off with `--no-collector.NAME`; single metrics with `--metrics.config=FILE`:\n\n")
	b.WriteString("  ```yaml\n  disable: [\"gpu_nvlink_*\"]                         # names or path.Match globs\n")
	b.WriteString("  enable: [\"gpu_nvlink_up\", \"gpu_bar1_memory_*\"]     # enable wins over disable\n  ```\n\n")
	b.WriteString("- `gpu_process_*` series are summed per owner (user, container, compose_project, compose_service, pod, namespace, slurm_job) on each GPU;\n")
	b.WriteString("  labels in [+...] (`pid`, `command`) are added only when per-process labels are turned on (`--collector.processes.pid-labels`);\n")
	b.WriteString("  `command` is the executable's name, the whole command line only with `--attribution.full-command-lines`.\n")

	rows := v.rows()
	for _, g := range v.groups() {
		fmt.Fprintf(&b, "\n## %s\n\n", g)
		if g == CollectorExporter {
			b.WriteString("Always produced, whatever collectors are enabled.\n\n")
		}
		fmt.Fprintf(&b, "| Name | Type | Unit | Labels | %s | Source | Help |\n", strings.ToUpper(v.stateColumn()[:1])+v.stateColumn()[1:])
		b.WriteString("|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			if r.Collector != g {
				continue
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n",
				r.Name, r.Type, r.Unit, mdEscape.Replace(r.allLabels(", ")), onOff(r.on),
				mdEscape.Replace(r.Source), mdEscape.Replace(r.Help))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
