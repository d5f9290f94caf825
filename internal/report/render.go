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
		return enc.Encode(r)
	case "markdown":
		return writeMarkdown(w, r)
	case "html":
		return writeHTML(w, r)
	}
	return fmt.Errorf("unknown --format %q (one of: %s)", format, strings.Join(Formats, ", "))
}

// column is one figure of a row, in the order every format shows them.
type column struct {
	title string // with its unit
	value func(Row) float64
	// format renders the value for people; csv and json keep full precision.
	format func(float64) string
	total  bool // meaningful on the totals row
}

func hours(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func pct(v float64) string   { return strconv.FormatFloat(100*v, 'f', 1, 64) }
func gib(v float64) string   { return strconv.FormatFloat(v/(1<<30), 'f', 1, 64) }
func kwh(v float64) string   { return strconv.FormatFloat(v, 'f', 2, 64) }

func columns(r *Report) []column {
	cols := []column{
		{"GPU-h allocated", func(r Row) float64 { return r.AllocatedGPUHours }, hours, true},
		{"GPU-h used", func(r Row) float64 { return r.UsedGPUHours }, hours, true},
		{"mean util %", func(r Row) float64 { return r.MeanUtilization }, pct, true},
		{"p95 util %", func(r Row) float64 { return r.P95Utilization }, pct, false},
		{"peak mem GiB", func(r Row) float64 { return r.PeakMemoryBytes }, gib, true},
		{"mean mem GiB", func(r Row) float64 { return r.MeanMemoryBytes }, gib, false},
		{"energy kWh", func(r Row) float64 { return r.EnergyKWh }, kwh, true},
		{"idle-allocated h", func(r Row) float64 { return r.IdleAllocatedHours }, hours, true},
	}
	if r.By == "job" {
		cols = append(cols, column{"duration h", func(r Row) float64 { return r.DurationHours }, hours, false})
	}
	if r.CarbonIntensity > 0 {
		cols = append(cols, co2eColumn())
	}
	return cols
}

// ownerCells are a row's owner labels; "-" for an empty one.
func ownerCells(r *Report, row Row) []string {
	out := make([]string, len(r.Labels))
	for i, l := range r.Labels {
		out[i] = row.Owner[l]
		if out[i] == "" {
			out[i] = "-"
		}
	}
	return out
}

// grid is the report as text cells: a header, the rows, the totals.
func grid(r *Report) (header []string, rows [][]string, total []string) {
	cols := columns(r)
	header = append(append([]string(nil), r.Labels...), titles(cols)...)
	for _, row := range r.Rows {
		cells := ownerCells(r, row)
		for _, c := range cols {
			cells = append(cells, c.format(c.value(row)))
		}
		rows = append(rows, cells)
	}
	total = make([]string, len(r.Labels))
	total[0] = "TOTAL"
	for i := 1; i < len(total); i++ {
		total[i] = ""
	}
	for _, c := range cols {
		if c.total {
			total = append(total, c.format(c.value(r.Totals)))
		} else {
			total = append(total, "")
		}
	}
	return header, rows, total
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
	f := r.Fleet
	return fmt.Sprintf("Fleet: %d GPUs, mean utilization %s %%, %s idle GPU-hours, %s kWh. Utilization and memory from %s. Hours and energy from %s.",
		f.GPUs, pct(f.MeanUtilization), hours(f.IdleGPUHours), kwh(f.EnergyKWh), r.Sources, r.BasisNote)
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
	_, err := fmt.Fprintln(w, r.fleetLine())
	return err
}

func writeMarkdown(w io.Writer, r *Report) error {
	header, rows, total := grid(r)
	fmt.Fprintf(w, "## %s\n\n", r.title())
	line := func(cells []string) {
		esc := make([]string, len(cells))
		for i, c := range cells {
			esc[i] = strings.ReplaceAll(c, "|", `\|`)
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
	for i := range total {
		if total[i] != "" {
			total[i] = "**" + total[i] + "**"
		}
	}
	line(total)
	_, err := fmt.Fprintf(w, "\n%s\n", r.fleetLine())
	return err
}

// writeCSV writes one line per owner with full precision and base units
// (hours, ratios, bytes, kWh), for spreadsheets and chargeback scripts.
func writeCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	header := append(append([]string(nil), r.Labels...),
		"allocated_gpu_hours", "used_gpu_hours", "mean_utilization", "p95_utilization",
		"peak_memory_bytes", "mean_memory_bytes", "energy_kwh", "idle_allocated_hours")
	if r.By == "job" {
		header = append(header, "duration_hours")
	}
	if r.CarbonIntensity > 0 {
		header = append(header, "co2e_kg")
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, row := range r.Rows {
		cells := make([]string, len(r.Labels))
		for i, l := range r.Labels {
			cells[i] = csvSafe(row.Owner[l])
		}
		cells = append(cells, f(row.AllocatedGPUHours), f(row.UsedGPUHours), f(row.MeanUtilization), f(row.P95Utilization),
			f(row.PeakMemoryBytes), f(row.MeanMemoryBytes), f(row.EnergyKWh), f(row.IdleAllocatedHours))
		if r.By == "job" {
			cells = append(cells, f(row.DurationHours))
		}
		if row.CO2eKg != nil {
			cells = append(cells, f(*row.CO2eKg))
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
