package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Formats are the --format values.
var Formats = []string{"table", "csv", "json", "markdown", "html"}

// Write renders r in one of Formats.
func Write(w io.Writer, r *Report, format string) error {
	switch format {
	case "table":
		return writeTable(w, r)
	case "csv":
		return writeCSV(w, r)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("encoding the report as JSON: %w", err)
		}
		return nil
	case "markdown":
		return writeMarkdown(w, r)
	case "html":
		return writeHTML(w, r)
	}
	return fmt.Errorf("unknown --format %q (one of: %s)", format, strings.Join(Formats, ", "))
}

// column is one figure of a row, in the order every format shows them. Its
// title and its CSV/JSON name both say per what it is: per GPU, or summed
// over the owner's GPUs (GPU-hours are summed by their unit).
type column struct {
	title string // for people, with its unit
	name  string // the CSV column and JSON field, in base units
	value func(Row) (float64, bool)
	// format renders the value for people; csv and json keep full precision.
	format func(float64) string
	total  bool // meaningful on the totals row
	// summed columns add up over the rows: people see them at scale ×
	// value with decimals, rounded so that the rows add up to the total.
	summed   bool
	scale    float64
	decimals int
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) }
func gib(v float64) string { return strconv.FormatFloat(v/(1<<30), 'f', 1, 64) }

func known(v float64) (float64, bool) { return v, true }

func maybe(v *float64) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return *v, true
}

// notAvailable is what people see for a figure with no reading.
const notAvailable = "n/a"

func columns(r *Report) []column {
	p := precisionOf(r)
	h := p.hourUnit
	hoursCol := func(title, name string, value func(Row) (float64, bool)) column {
		return column{title: h + " " + title, name: name, value: value, format: p.hours, total: true, summed: true, scale: p.hourScale, decimals: p.hourDecimals}
	}
	kwhCol := func(title, name string, value func(Row) (float64, bool)) column {
		return column{title: title, name: name, value: value, format: p.kwh, total: true, summed: true, scale: 1, decimals: p.kwhDecimals}
	}
	cols := []column{
		hoursCol("allocated", "allocated_gpu_hours", func(r Row) (float64, bool) { return known(r.AllocatedGPUHours) }),
		hoursCol("used", "used_gpu_hours", func(r Row) (float64, bool) { return maybe(r.UsedGPUHours) }),
		{title: "mean util % per GPU", name: "mean_utilization_per_gpu", value: func(r Row) (float64, bool) { return maybe(r.MeanUtilizationPerGPU) }, format: pct, total: true},
		{title: "p95 util % per GPU", name: "p95_utilization_per_gpu", value: func(r Row) (float64, bool) { return maybe(r.P95UtilizationPerGPU) }, format: pct},
		{title: "peak mem GiB summed", name: "peak_memory_bytes_summed", value: func(r Row) (float64, bool) { return maybe(r.PeakMemoryBytesSummed) }, format: gib},
		{title: "mean mem GiB summed", name: "mean_memory_bytes_summed", value: func(r Row) (float64, bool) { return maybe(r.MeanMemoryBytesSummed) }, format: gib},
		kwhCol("energy kWh summed", "energy_kwh_summed", func(r Row) (float64, bool) { return maybe(r.EnergyKWhSummed) }),
		hoursCol("idle-allocated", "idle_allocated_gpu_hours", func(r Row) (float64, bool) { return known(r.IdleAllocatedGPUHours) }),
		hoursCol("no util reading", "unmeasured_gpu_hours", func(r Row) (float64, bool) { return known(r.UnmeasuredGPUHours) }),
	}
	if r.By == "job" {
		cols = append(cols, column{title: "duration h", name: "duration_hours", value: func(r Row) (float64, bool) { return known(r.DurationHours) },
			format: func(v float64) string { return strconv.FormatFloat(v, 'f', p.hourDecimals, 64) }})
	}
	if r.CarbonIntensity > 0 {
		cols = append(cols, kwhCol("CO2e kg summed", "co2e_kg", func(r Row) (float64, bool) { return maybe(r.CO2eKg) }))
	}
	return cols
}

// cell is a figure as people read it.
func (c column) cell(row Row) string {
	v, ok := c.value(row)
	if !ok {
		return notAvailable
	}
	return c.format(v)
}

// legend says what "per GPU" and "summed" mean, under every human format.
const legend = "Per GPU: averaged over the GPUs the owner held, at most 100 % each. " +
	"Summed: over the owner's GPUs. Utilization counts only GPU-hours with a utilization reading " +
	"(a GPU in MIG mode has none: see the no util reading column); n/a: no reading at all."

// ownerCells are a row's owner labels, made safe to print; "-" for an empty one.
func ownerCells(r *Report, row Row) []string {
	out := make([]string, len(r.Labels))
	for i, l := range r.Labels {
		out[i] = printable(row.Owner[l])
		if out[i] == "" {
			out[i] = "-"
		}
	}
	return out
}

// grid is the report as text cells: a header, the rows, the totals. A
// summed column's rows are rounded to add up to its total as printed.
func grid(r *Report) (header []string, rows [][]string, total []string) {
	cols := columns(r)
	header = append(append([]string(nil), r.Labels...), titles(cols)...)
	for _, row := range r.Rows {
		rows = append(rows, ownerCells(r, row))
	}
	total = make([]string, len(r.Labels))
	total[0] = "TOTAL"
	for _, c := range cols {
		cells, sum := c.cells(r)
		for i := range rows {
			rows[i] = append(rows[i], cells[i])
		}
		total = append(total, sum)
	}
	return header, rows, total
}

// cells are the column's cells for every row, and its totals cell ("" where
// a total means nothing).
func (c column) cells(r *Report) ([]string, string) {
	out := make([]string, len(r.Rows))
	if !c.summed {
		for i, row := range r.Rows {
			out[i] = c.cell(row)
		}
		if !c.total {
			return out, ""
		}
		return out, c.cell(r.Totals)
	}
	values := make([]float64, len(r.Rows))
	present := make([]bool, len(r.Rows))
	for i, row := range r.Rows {
		v, ok := c.value(row)
		values[i], present[i] = v*c.scale, ok
	}
	rounded, sum := roundedColumn(values, present, c.decimals)
	for i := range r.Rows {
		out[i] = notAvailable
		if present[i] {
			out[i] = strconv.FormatFloat(rounded[i], 'f', c.decimals, 64)
		}
	}
	if _, ok := c.value(r.Totals); !ok {
		return out, notAvailable
	}
	return out, strconv.FormatFloat(sum, 'f', c.decimals, 64)
}

func titles(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.title
	}
	return out
}

func (r *Report) title() string {
	return fmt.Sprintf("GPU usage by %s, %s to %s (step %s, idle below %s %%)",
		r.By, r.From.UTC().Format("2006-01-02 15:04 MST"), r.To.UTC().Format("2006-01-02 15:04 MST"), r.Step, pct(r.IdleBelow))
}

func (r *Report) fleetLine() string {
	f, p := r.Fleet, precisionOf(r)
	util, energy := notAvailable, notAvailable
	if f.MeanUtilizationPerGPU != nil {
		util = pct(*f.MeanUtilizationPerGPU) + " %"
	}
	if f.EnergyKWhSummed != nil {
		energy = p.kwh(*f.EnergyKWhSummed) + " kWh"
	}
	unmeasured := ""
	if f.GPUsWithoutUtilization > 0 {
		unmeasured = fmt.Sprintf(" (%d without a utilization reading)", f.GPUsWithoutUtilization)
	}
	return fmt.Sprintf("Fleet: %d GPUs%s, mean utilization per GPU %s, idle %s, energy summed %s%s. Memory from %s. Owners' hours, utilization and energy from %s.",
		f.GPUs, unmeasured, util, p.hours(f.IdleGPUHours)+" "+p.hourUnit, energy, co2e(f.CO2eKg, p), r.Sources, r.BasisNote)
}

// notes are the report's notes, made safe to print.
func (r *Report) notes() []string {
	out := make([]string, len(r.Notes))
	for i, n := range r.Notes {
		out[i] = "Note: " + printable(n)
	}
	return out
}

func writeTable(w io.Writer, r *Report) error {
	header, rows, total := grid(r)
	fmt.Fprintln(w, r.title())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, line := range append(append([][]string{header}, rows...), total) {
		fmt.Fprintln(tw, strings.Join(line, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, r.HoursMeaning)
	fmt.Fprintln(w, r.fleetLine())
	fmt.Fprintln(w, legend)
	for _, n := range r.notes() {
		fmt.Fprintln(w, n)
	}
	return nil
}

func writeMarkdown(w io.Writer, r *Report) error {
	header, rows, total := grid(r)
	fmt.Fprintf(w, "## %s\n\n", r.title())
	line := func(cells []string) {
		esc := make([]string, len(cells))
		for i, c := range cells {
			esc[i] = markdownEscape(c)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(esc, " | "))
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---:"
		if i < len(r.Labels) {
			sep[i] = "---"
		}
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(sep, "|"))
	for _, row := range rows {
		line(row)
	}
	bold := make([]string, len(total))
	for i, t := range total {
		if t != "" {
			bold[i] = "**" + markdownEscape(t) + "**"
		}
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(bold, " | "))
	fmt.Fprintf(w, "\n%s\n\n%s\n\n%s\n", markdownEscape(r.HoursMeaning), markdownEscape(r.fleetLine()), markdownEscape(legend))
	for _, n := range r.notes() {
		fmt.Fprintf(w, "\n%s\n", markdownEscape(n))
	}
	return nil
}

// writeCSV writes one line per owner with full precision and base units
// (hours, ratios, bytes, kWh), for spreadsheets and chargeback scripts; an
// absent figure is an empty cell. Owner names are kept as they are (a
// script matches them), only defused as formulas.
func writeCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	cols := columns(r)
	header := append([]string(nil), r.Labels...)
	for _, c := range cols {
		header = append(header, c.name)
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, row := range r.Rows {
		cells := make([]string, 0, len(header))
		for _, l := range r.Labels {
			cells = append(cells, csvSafe(row.Owner[l]))
		}
		for _, c := range cols {
			v, ok := c.value(row)
			if !ok {
				cells = append(cells, "")
				continue
			}
			cells = append(cells, strconv.FormatFloat(v, 'g', -1, 64))
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvSafe keeps a spreadsheet from reading an owner name that an outsider
// chose (a pod or container name) as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
