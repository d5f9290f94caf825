package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"

	"github.com/gpuwatch/gpuwatch/internal/health"
)

type healthCommand struct {
	common *commonFlags
	output string
}

func newHealthCommand(app *kingpin.Application, common *commonFlags) *healthCommand {
	c := &healthCommand{common: common}
	cmd := app.Command("health", "Judge this node's GPUs under the health policy (--health.policy, docs/health.md) and exit 0 when every GPU is fit for work (ok or warn), 1 when a GPU or the node failed, 2 when health cannot be told (a GPU did not answer, or no reading). Reads the GPUs itself, with the same backend flags as ps.")
	cmd.Flag("output", "Output format: text, json (the /api/v1/health document) or line (the node's verdict and reason on one line of stdout, also when health cannot be told: node-problem-detector's custom plugins, see docs/health.md).").Short('o').Default("text").EnumVar(&c.output, "text", "json", "line")
	return c
}

func (c *healthCommand) name() string { return "health" }

func (c *healthCommand) run() error {
	// Read by a person or a checker: start-up notes would bury the verdict.
	if c.common.log.Level != nil && c.common.log.Level.String() == "info" {
		_ = c.common.log.Level.Set("warn")
	}
	logger := promslog.New(c.common.log)
	c.common.command = "health"
	st, err := c.common.buildStack(logger)
	if err != nil {
		return c.unknown(fmt.Sprintf("health unknown: %v", err))
	}
	defer st.Close()
	snap, err := st.settledSnapshot(c.common)
	if err != nil {
		return c.unknown(fmt.Sprintf("health unknown: no GPU reading: %v", err))
	}
	report := health.NewReport(snap)
	switch c.output {
	case "json":
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	case "line":
		_, err = fmt.Println(report.Line())
	default:
		err = report.WriteText(os.Stdout)
	}
	if err != nil {
		return exitStatus{health.ExitUnknown, fmt.Sprintf("writing the report: %v", err)}
	}
	if code := report.ExitCode(); code != 0 {
		return exitStatus{code: code}
	}
	return nil
}

// unknown is the exit of a run that could not tell health. With -o line
// the reason goes to stdout, the one line a node-problem-detector plugin's
// condition message is made of; otherwise to stderr.
func (c *healthCommand) unknown(msg string) error {
	if c.output == "line" {
		fmt.Println(health.Report{Status: "unknown", Reason: msg}.Line())
		return exitStatus{code: health.ExitUnknown}
	}
	return exitStatus{health.ExitUnknown, msg}
}

// exitStatus is an error that sets the exit status; an empty message
// prints nothing (the command already said why on stdout).
type exitStatus struct {
	code int
	msg  string
}

func (e exitStatus) Error() string { return e.msg }
