package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/internal/health"
)

// The values of --health.source.
const (
	healthSourceAuto  = "auto"
	healthSourceServe = "serve"
	healthSourceLocal = "local"
)

type healthCommand struct {
	common *commonFlags
	web    *web.FlagConfig
	output string
	source string
	// serveURL is the running serve's base URL; empty: from
	// --web.listen-address and --web.config.file.
	serveURL     string
	httpConfig   string
	serveTimeout time.Duration
	kernelLog    string
	kernelCmd    []string
	slurm        healthSlurm
}

func newHealthCommand(app *kingpin.Application, common *commonFlags, serve *serveCommand) *healthCommand {
	c := &healthCommand{common: common, web: serve.web}
	cmd := app.Command("health", "Judge this node's GPUs under the health policy (--health.policy, docs/health.md) and exit 0 when every GPU is fit for work (ok or warn), 1 when a GPU or the node failed, 2 when health cannot be told (a GPU did not answer, or no reading). "+
		"Asks the running serve first (its /api/v1/health, with the XID history it saw); when none answers, reads the GPUs itself, with the same backend flags as ps, and the kernel log's NVRM: Xid lines from before it started.")
	cmd.Flag("output", "Output format: text, json (the /api/v1/health document) or line (the node's verdict and reason on one line of stdout, also when health cannot be told: node-problem-detector's custom plugins, see docs/health.md).").Short('o').Default("text").EnumVar(&c.output, "text", "json", "line")
	cmd.Flag("health.source", "Who judges: auto (the running serve, else this command reading the GPUs and the kernel log), serve (only the running serve: exit 2 when it does not answer) or local (never ask a serve).").
		Default(healthSourceAuto).EnumVar(&c.source, healthSourceAuto, healthSourceServe, healthSourceLocal)
	cmd.Flag("health.serve-url", "The running serve's base URL. Default: --web.listen-address on this host (127.0.0.1 or [::1] for a wildcard address), https when --web.config.file has a tls_server_config.").
		PlaceHolder("URL").StringVar(&c.serveURL)
	cmd.Flag("health.http-config", "YAML file with the HTTP client settings for the serve, as for report's --prometheus.http-config: basic_auth (the password of a --web.config.file user), tls_config (ca_file, server_name), authorization.").
		PlaceHolder("FILE").StringVar(&c.httpConfig)
	cmd.Flag("health.serve-timeout", "How long the serve may take to answer before this command reads the GPUs itself and says so. 0: the serve's own bound for /api/v1/health (--collection.timeout + --attribution.timeout + 1s).").
		Default("0s").DurationVar(&c.serveTimeout)
	cmd.Flag("health.kernel-log", "Kernel log to read NVRM: Xid lines from when no serve answers (it needs root or CAP_SYSLOG); empty: none. A line that cannot be read is a warning, never a verdict.").
		Default("/dev/kmsg").StringVar(&c.kernelLog)
	cmd.Flag("health.kernel-log-command", "Instead of --health.kernel-log, run this command and read its output, one argument per flag: --health.kernel-log-command=journalctl --health.kernel-log-command=-k --health.kernel-log-command=-b --health.kernel-log-command=-o --health.kernel-log-command=short-iso. Run without a shell, killed after 5s.").
		PlaceHolder("ARG").StringsVar(&c.kernelCmd)
	c.slurm.register(cmd)
	return c
}

func (c *healthCommand) name() string { return "health" }

func (c *healthCommand) run() error {
	// Read by a person or a checker: start-up notes would bury the verdict.
	if c.common.log.Level != nil && c.common.log.Level.String() == "info" {
		_ = c.common.log.Level.Set("warn")
	}
	if c.serveTimeout < 0 {
		return fmt.Errorf("--health.serve-timeout=%s: must be 0 or positive", c.serveTimeout)
	}
	if err := c.slurm.check(&c.common.slurm); err != nil {
		return exitStatus{health.ExitUnknown, err.Error()}
	}
	var warnings []string
	if c.source != healthSourceLocal {
		report, err := c.fromServe()
		if err == nil {
			return c.print(report)
		}
		if c.source == healthSourceServe {
			return c.unknown("health unknown: " + err.Error())
		}
		warnings = append(warnings, err.Error()+"; read the GPUs directly instead")
	}
	report, err := c.local()
	if err != nil {
		return c.unknown(err.Error())
	}
	report.Warnings = append(warnings, report.Warnings...)
	return c.print(report)
}

// local judges the GPUs read by this command, with the kernel log's XIDs
// from before it started.
func (c *healthCommand) local() (health.Report, error) {
	start := time.Now()
	logger := promslog.New(c.common.log)
	c.common.command = "health"
	st, err := c.common.buildStack(logger)
	if err != nil {
		return health.Report{}, fmt.Errorf("health unknown: %w", err)
	}
	defer st.Close()
	snap, err := st.settledSnapshot(c.common)
	if err != nil {
		return health.Report{}, fmt.Errorf("health unknown: no GPU reading: %w", err)
	}
	from := "the GPUs"
	var warnings []string
	if what, xids, warns := c.readKernelLog(); what != "" {
		from += " and " + what
		warnings = warns
		_, unmatched := st.health.RecordKernelXIDs(snap, xids, start)
		warnings = append(warnings, unmatched...)
		// Judged again with the logged XIDs: the snapshot's own counts
		// are already in the history, so nothing is counted twice.
		snap.Health = st.health.Judge(snap)
	} else {
		warnings = warns
	}
	report := health.NewReport(snap)
	report.Source, report.From, report.Warnings = health.SourceLocal, from, warnings
	return report, nil
}

func (c *healthCommand) print(report health.Report) error {
	var err error
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
	if err := c.slurm.act(report, &c.common.slurm, os.Stderr); err != nil {
		return exitStatus{health.ExitUnknown, err.Error()}
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
