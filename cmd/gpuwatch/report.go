package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/internal/report"
)

// reportCommand queries Prometheus for who used how much GPU; it does not
// read any GPU itself.
type reportCommand struct {
	url, httpConfig string
	timeout         time.Duration
	retries         int
	maxResponse     units.Base2Bytes
	from, to, last  string
	step            time.Duration
	by, format, out string
	idleBelow       float64
	carbon          float64
	rules           bool
	now             func() time.Time
}

func newReportCommand(app *kingpin.Application) *reportCommand {
	c := &reportCommand{now: time.Now}
	cmd := app.Command("report", "Usage report from Prometheus or VictoriaMetrics: GPU-hours allocated and used, utilization, memory, energy and idle-allocated hours per owner, "+
		"with totals and a fleet summary. Example: gpuwatch report --prometheus.url=http://prometheus:9090 --last=7d --by=namespace")
	cmd.Flag("prometheus.url", "Base URL of the Prometheus (or VictoriaMetrics) HTTP API that scrapes gpuwatch.").Required().StringVar(&c.url)
	cmd.Flag("prometheus.http-config", "YAML file with the HTTP client settings for that server, as in a Prometheus scrape config: basic_auth, authorization, tls_config (ca_file, cert_file, key_file), proxy_url.").StringVar(&c.httpConfig)
	cmd.Flag("prometheus.timeout", "Upper bound on the whole report's queries.").Default("2m").DurationVar(&c.timeout)
	cmd.Flag("prometheus.max-response-size", "Largest answer to one query the report reads (decompressed); a larger one ends the report with an error naming the query. A report's answers hold one number per owner, so the default is ample.").Default("64MiB").BytesVar(&c.maxResponse)
	cmd.Flag("prometheus.retries", "Retries of a query that failed for a reason that may pass (502, 503, 504, 429, a dropped connection).").Default("3").IntVar(&c.retries)
	cmd.Flag("last", "Report the range that ends now (or at --to) and lasts this long: 24h, 7d, 4w.").StringVar(&c.last)
	cmd.Flag("from", "Start of the range: RFC 3339 (2026-11-01T00:00:00Z), a date (2026-11-01, UTC) or Unix seconds.").StringVar(&c.from)
	cmd.Flag("to", "End of the range, in the same forms; default now.").StringVar(&c.to)
	cmd.Flag("step", "Time resolution of every figure. Default: 1m up to a day, 5m up to a week, 15m up to 31 days, 1h beyond.").DurationVar(&c.step)
	cmd.Flag("by", "Owner of each row: "+strings.Join(report.Dimensions(), ", ")+".").Default("namespace").StringVar(&c.by)
	cmd.Flag("idle-below", "Utilization under which a held GPU counts as idle (a ratio).").Default("0.05").Float64Var(&c.idleBelow)
	cmd.Flag("rules", "Read utilization and memory from the recording rules shipped in deploy/prometheus/recording.yml where the server has them over the whole range (cheaper); --no-rules always joins the raw series.").Default("true").BoolVar(&c.rules)
	cmd.Flag("carbon-intensity", "Grams of CO2e per kWh of the electricity the GPUs use (G_PER_KWH): adds CO2e (kg) beside every energy figure. 0: off.").PlaceHolder("G_PER_KWH").Default("0").Float64Var(&c.carbon)
	cmd.Flag("format", "Output format: "+strings.Join(report.Formats, ", ")+".").Default("table").StringVar(&c.format)
	cmd.Flag("output", "Write the report to this file instead of standard output: a regular file (or a link's target) is replaced atomically; a character device or pipe (/dev/stdout, /dev/null) is written in place; anything else is refused.").StringVar(&c.out)
	return c
}

func (c *reportCommand) name() string { return "report" }

func (c *reportCommand) run() error {
	if !slices.Contains(report.Formats, c.format) {
		return fmt.Errorf("--format=%s: one of %s", c.format, strings.Join(report.Formats, ", "))
	}
	opts, err := c.options()
	if err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if c.timeout <= 0 {
		return fmt.Errorf("--prometheus.timeout=%s: must be positive", c.timeout)
	}
	if c.retries < 0 {
		return fmt.Errorf("--prometheus.retries=%d: must not be negative", c.retries)
	}
	if c.maxResponse <= 0 {
		return fmt.Errorf("--prometheus.max-response-size=%s: must be positive", c.maxResponse)
	}
	// The URL may carry a password: no output or error shows it.
	server := report.RedactURL(c.url)
	client, err := report.NewClient(report.ClientOptions{URL: c.url, HTTPConfigFile: c.httpConfig, Retries: c.retries, MaxResponseBytes: int64(c.maxResponse)})
	if err != nil {
		return redactPassword(err, c.url)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	r, err := report.Build(ctx, client, opts)
	if err != nil {
		return redactPassword(fmt.Errorf("%s: %w", server, err), c.url)
	}
	r.Server, r.Generated = server, c.now().UTC()
	var buf bytes.Buffer
	if err := report.Write(&buf, r, c.format); err != nil {
		return err
	}
	if c.out == "" {
		_, err := os.Stdout.Write(buf.Bytes())
		return err
	}
	return report.WriteFile(c.out, buf.Bytes())
}

// redactPassword is the last guard: whatever a library put in an error (a
// URL it quoted whole), the password of --prometheus.url does not appear.
func redactPassword(err error, rawURL string) error {
	u, perr := url.Parse(rawURL)
	if perr != nil || u.User == nil {
		return err
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
}

// options turns the range flags into times: --last alone ends now,
// --from/--to name both ends, --last with --to ends there.
func (c *reportCommand) options() (report.Options, error) {
	o := report.Options{By: c.by, Step: c.step, IdleBelow: c.idleBelow, RawOnly: !c.rules, CarbonIntensity: c.carbon}
	var err error
	o.To = c.now()
	if c.to != "" {
		if o.To, err = parseTime("--to", c.to); err != nil {
			return o, err
		}
	}
	switch {
	case c.last != "" && c.from != "":
		return o, fmt.Errorf("give --last or --from, not both")
	case c.last != "":
		d, err := model.ParseDuration(c.last)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("--last=%s: want a positive duration such as 24h, 7d or 4w", c.last)
		}
		// The range ends now, not at the last whole step: rounding down
		// would hide the newest data (all of it, for a server that began
		// scraping gpuwatch less than a step ago).
		o.From = o.To.Add(-time.Duration(d))
	case c.from != "":
		if o.From, err = parseTime("--from", c.from); err != nil {
			return o, err
		}
	default:
		return o, fmt.Errorf("a range is needed: --last=7d, or --from=2026-11-01 --to=2026-11-08")
	}
	return o, nil
}

func parseTime(flag, s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil && secs > 0 {
		return time.Unix(0, int64(secs*1e9)).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%s=%s: want RFC 3339 (2026-11-01T00:00:00Z), a date (2026-11-01) or Unix seconds", flag, s)
}
