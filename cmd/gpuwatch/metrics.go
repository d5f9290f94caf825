package main

import (
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
	cmd := app.Command("metrics", "List every metric gpuwatch can export: name, type, unit, labels, default, NVML source and help.")
	cmd.Flag("format", "Output format.").Default("table").EnumVar(&c.format, "table", "markdown", "json")
	return c
}

func (c *metricsCommand) name() string { return "metrics" }

func (c *metricsCommand) run() error {
	return exporter.WriteCatalog(os.Stdout, c.format)
}
