package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/jobs"
	"github.com/gpuwatch/gpuwatch/internal/report"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// jobCommand shows one job's (or pod's) GPU use from the job records: the
// local journal, or every node of a Slurm job through their gpuwatch.
type jobCommand struct {
	common      *commonFlags
	id, pod     string
	format      string
	nodeURL     string
	nodes       string
	httpConfig  string
	promURL     string
	promConfig  string
	lookback    time.Duration
	timeout     time.Duration
	wait        time.Duration
	concurrency int
	admin       bool
	out         io.Writer
}

func newJobCommand(app *kingpin.Application, common *commonFlags) *jobCommand {
	c := &jobCommand{common: common, out: os.Stdout}
	cmd := app.Command("job", "A Slurm job's or a pod's GPU use, per GPU and in total, with efficiency notes, from the job records (docs/jobs.md). "+
		"On the node it reads --accounting.dir; for a job on several nodes, give --job.node-url. Example: gpuwatch job 4211 --job.node-url=http://{node}:9410")
	cmd.Arg("JOBID", "Slurm job ID (or the pod's UID).").StringVar(&c.id)
	cmd.Flag("pod", "Show the pod NAMESPACE/NAME instead of a job.").StringVar(&c.pod)
	cmd.Flag("output", "Output format: table, json or markdown.").Short('o').Default("table").EnumVar(&c.format, jobs.Formats...)
	cmd.Flag("job.node-url", "Ask the gpuwatch of every node of the job, at this URL template ({node} is the node name), instead of reading the local journal; e.g. http://{node}:9410.").StringVar(&c.nodeURL)
	cmd.Flag("job.nodes", "The job's nodes, as a Slurm host list (gpu[01-04]). Default: the job's NodeList from scontrol show job.").StringVar(&c.nodes)
	cmd.Flag("job.http-config", "YAML file with the HTTP client settings for the nodes' gpuwatch, as for report's --prometheus.http-config: basic_auth, authorization, tls_config, proxy_url.").StringVar(&c.httpConfig)
	cmd.Flag("job.timeout", "How long to wait for each node's (or Prometheus's) answer.").Default("10s").DurationVar(&c.timeout)
	cmd.Flag("job.wait", "With --job.node-url: keep asking, after 1s, 2s, 4s, ... up to 16s between rounds, for at most this long, the nodes whose answer can still change (the job still running there, a timeout); a node with the final record, none, or no gpuwatch listening (connection refused) is not asked again (the EpilogSlurmctld runs beside the nodes' epilogs). 0: ask once.").Default("0s").DurationVar(&c.wait)
	cmd.Flag("job.concurrency", "With --job.node-url: how many nodes are asked at once.").Default(strconv.Itoa(jobs.DefaultNodeConcurrency)).IntVar(&c.concurrency)
	cmd.Flag("job.admin-comment", "Store the summary in the Slurm job's AdminComment, after what other tools such as jobstats wrote there, instead of printing it: for an EpilogSlurmctld (deploy/slurm). A job not yet ended takes it in the controller (scontrol update); an ended one only in the accounting database (sacctmgr: needs slurmdbd), and not when sacctmgr would lowercase another tool's text that has capitals.").BoolVar(&c.admin)
	cmd.Flag("prometheus.url", "Read the job from the accounting counters in this Prometheus (or VictoriaMetrics) instead: where the nodes' journals are out of reach. Gives no start or end time.").StringVar(&c.promURL)
	cmd.Flag("prometheus.http-config", "YAML file with the HTTP client settings for --prometheus.url, as for report.").StringVar(&c.promConfig)
	cmd.Flag("job.lookback", "With --prometheus.url: how far back the job may have run (the counters' increase over this window ending now).").Default("30d").DurationVar(&c.lookback)
	return c
}

func (c *jobCommand) name() string { return "job" }

func (c *jobCommand) run() error {
	switch {
	case c.id == "" && c.pod == "":
		return errors.New("gpuwatch job: give a JOBID or --pod=NAMESPACE/NAME")
	case c.id != "" && c.pod != "":
		return errors.New("gpuwatch job: give a JOBID or --pod, not both")
	case c.pod != "" && !strings.Contains(c.pod, "/"):
		return fmt.Errorf("--pod=%q: want NAMESPACE/NAME", c.pod)
	case c.nodeURL != "" && c.promURL != "":
		return errors.New("gpuwatch job: --job.node-url or --prometheus.url, not both")
	case c.concurrency < 1:
		return fmt.Errorf("--job.concurrency=%d: must be 1 or more", c.concurrency)
	}
	q := jobs.Query{ID: c.id, Pod: c.pod}
	recs, missing, source, err := c.fetch(q)
	if err != nil {
		return err
	}
	s, ok := jobs.Summarize(q.Name(), recs)
	if !ok {
		where := "in " + c.common.journal.dir
		switch {
		case c.nodeURL != "":
			where = "on its nodes (" + strings.Join(missing, "; ") + ")"
		case c.promURL != "":
			where = "in " + report.RedactURL(c.promURL) + "'s accounting counters over the last " + c.lookback.String()
		}
		return fmt.Errorf("no record of %s %s", q.Name(), where)
	}
	if c.pod != "" && s.Pod != nil && s.Pod.UID != "" {
		s.JobID = s.Pod.UID
	}
	s.MissingNodes, s.Source = missing, source
	if c.admin {
		if c.pod != "" {
			return errors.New("--job.admin-comment is for Slurm jobs, not pods")
		}
		store := jobs.AdminCommentStore{Run: slurm.ExecRunner{Timeout: c.timeout}, Scontrol: c.common.slurm.scontrol}
		comment, err := store.Store(context.Background(), c.id, s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(c.out, comment)
		return err
	}
	return jobs.Render(c.out, s, c.format)
}

// fetch reads the job's records from where the flags say.
func (c *jobCommand) fetch(q jobs.Query) (recs []jobs.Record, missing []string, source string, err error) {
	ctx := context.Background()
	switch {
	case c.nodeURL != "":
		nodes, err := c.jobNodes(ctx)
		if err != nil {
			return nil, nil, "", err
		}
		recs, missing, err = jobs.FromNodes(ctx, q, jobs.NodesOptions{URLTemplate: c.nodeURL, Nodes: nodes, HTTPConfigFile: c.httpConfig,
			Timeout: c.timeout, Wait: c.wait, Concurrency: c.concurrency})
		return recs, missing, "nodes", err
	case c.promURL != "":
		api, err := report.NewClient(report.ClientOptions{URL: c.promURL, HTTPConfigFile: c.promConfig, Name: "gpuwatch-job"})
		if err != nil {
			return nil, nil, "", err
		}
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		recs, err = jobs.FromPrometheusCounters(ctx, api, q, c.lookback, time.Now())
		return recs, nil, "prometheus", err
	}
	recs, err = jobs.FromLocal(c.common.journal.dir, q)
	return recs, nil, "journal", err
}

// jobNodes is --job.nodes, else the job's node list from scontrol.
func (c *jobCommand) jobNodes(ctx context.Context) ([]string, error) {
	if c.nodes != "" {
		nodes, err := slurm.ExpandHostlist(c.nodes)
		if err != nil {
			return nil, fmt.Errorf("--job.nodes=%q: %w", c.nodes, err)
		}
		return nodes, nil
	}
	if c.pod != "" {
		return nil, errors.New("--pod with --job.node-url needs --job.nodes: the node the pod ran on")
	}
	return jobs.SlurmJobNodes(ctx, slurm.ExecRunner{Timeout: c.timeout}, c.common.slurm.scontrol, c.id)
}
