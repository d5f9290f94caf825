package main

import (
	"io"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/exporter"
)

type metricsCommand struct {
	common *commonFlags
	format string
}

func newMetricsCommand(app *kingpin.Application, common *commonFlags) *metricsCommand {
	c := &metricsCommand{common: common}
	cmd := app.Command("metrics", "List every metric gpuwatch can export: name, type, unit, labels, default, NVML source and help; then which metrics each backend gives (nvml, nvidia-smi) and which collector groups each driver branch serves.")
	cmd.Flag("format", "Output format: table (name, default and help, fitting 100 columns), wide (every column: type, unit, labels, collector, NVML source), markdown or json.").
		Default("table").EnumVar(&c.format, exporter.CatalogFormats...)
	return c
}

func (c *metricsCommand) name() string { return "metrics" }

func (c *metricsCommand) run() error {
	filter, err := c.common.metricFilter()
	if err != nil {
		return err
	}
	return writeMetricCatalog(os.Stdout, c.format, filter)
}

// writeMetricCatalog lists every metric gpuwatch can produce: the GPU
// exporter's catalog and the Slurm collector's. With a filter it shows
// which metrics that --metrics.config leaves on. Table and markdown end
// with which backends give each metric and the metric group × driver
// branch table.
func writeMetricCatalog(w io.Writer, format string, filter *exporter.MetricFilter) error {
	opts := []exporter.CatalogOption{exporter.WithExtraMetrics(slurmCatalog()...), exporter.WithExtraMetrics(journalCatalog()...)}
	if filter != nil {
		opts = append(opts, exporter.WithMetricFilter(filter))
	}
	if err := exporter.WriteCatalog(w, format, opts...); err != nil {
		return err
	}
	if err := writeBackends(w, format); err != nil {
		return err
	}
	return writeDriverSupport(w, format)
}
