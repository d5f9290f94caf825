package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/jobs"
	"github.com/gpuwatch/gpuwatch/internal/report"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// jobCommand shows one job's (or pod's) GPU use from the job records: the
// local journal, or every node of a Slurm job through their gpuwatch.
type jobCommand struct {
	common     *commonFlags
	id, pod    string
	format     string
	nodeURL    string
	nodes      string
	httpConfig string
	promURL    string
	promConfig string
	lookback   time.Duration
	timeout    time.Duration
	wait       time.Duration
	admin      bool
	out        io.Writer
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
	cmd.Flag("job.wait", "With --job.node-url: keep asking, every 2s up to this long, until every node has the job's record and none is still running (the EpilogSlurmctld runs beside the nodes' epilogs). 0: ask once.").Default("0s").DurationVar(&c.wait)
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
	}
	var recs []jobs.Record
	var missing []string
	var err error
	source := "journal"
	switch {
	case c.nodeURL != "" && c.promURL != "":
		return errors.New("gpuwatch job: --job.node-url or --prometheus.url, not both")
	case c.nodeURL != "":
		source = "nodes"
		recs, missing, err = c.fromNodesWaiting()
	case c.promURL != "":
		source = "prometheus"
		recs, err = c.fromPrometheus()
	default:
		recs, err = c.fromLocal()
	}
	if err != nil {
		return err
	}
	id := c.id
	if c.pod != "" {
		id = c.pod
	}
	s, ok := jobs.Summarize(id, recs)
	if !ok {
		where := "in " + c.common.journal.dir
		switch {
		case c.nodeURL != "":
			where = "on its nodes (" + strings.Join(missing, "; ") + ")"
		case c.promURL != "":
			where = "in " + c.promURL + "'s accounting counters over the last " + c.lookback.String()
		}
		return fmt.Errorf("no record of %s %s", id, where)
	}
	if c.pod != "" && s.Pod != nil && s.Pod.UID != "" {
		s.JobID = s.Pod.UID
	}
	s.MissingNodes, s.Source = missing, source
	if c.admin {
		return c.storeAdminComment(s)
	}
	return jobs.Render(c.out, s, c.format)
}

// matches says whether a record is the one asked for.
func (c *jobCommand) matches(r jobs.Record) bool {
	if c.pod != "" {
		return jobs.MatchesPod(r, c.pod)
	}
	return r.ID == c.id
}

// fromLocal reads this node's journal and running jobs' checkpoint.
func (c *jobCommand) fromLocal() ([]jobs.Record, error) {
	dir := c.common.journal.dir
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("--accounting.dir: %w (is gpuwatch serve keeping records here? or use --job.node-url)", err)
	}
	all, _, err := jobs.ReadJournal(dir)
	if err != nil {
		return nil, err
	}
	running, err := jobs.ReadRunning(dir)
	if err != nil {
		return nil, err
	}
	var out []jobs.Record
	for _, r := range append(all, running...) {
		if c.matches(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// fromPrometheus reads the job from the accounting counters.
func (c *jobCommand) fromPrometheus() ([]jobs.Record, error) {
	api, err := report.NewClient(report.ClientOptions{URL: c.promURL, HTTPConfigFile: c.promConfig})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	recs, err := jobs.FromPrometheus(ctx, api, jobs.PrometheusMatch(c.id, c.pod), c.lookback, time.Now())
	if err != nil {
		return nil, err
	}
	for i := range recs {
		r := &recs[i]
		if c.pod != "" {
			ns, name, _ := strings.Cut(c.pod, "/")
			r.Kind, r.ID, r.Pod = jobs.KindPod, c.pod, &jobs.PodIdentity{Namespace: ns, Name: name}
		} else {
			r.Kind, r.ID, r.Slurm = jobs.KindSlurm, c.id, &jobs.SlurmIdentity{JobID: c.id}
		}
	}
	return recs, nil
}

// errNoRecord: a node answered that it has no record of the job. That
// is final: a node that saw the job on its GPUs lists it as running until
// its record is written.
var errNoRecord = errors.New("no record")

// fromNodesWaiting asks the nodes until none of them still runs the job
// or could not be reached, or --job.wait has passed.
func (c *jobCommand) fromNodesWaiting() ([]jobs.Record, []string, error) {
	deadline := time.Now().Add(c.wait)
	for {
		recs, missing, unreachable, err := c.fromNodes()
		running := slices.ContainsFunc(recs, func(r jobs.Record) bool { return r.Running })
		if err != nil || (!unreachable && !running) || time.Now().After(deadline) {
			return recs, missing, err
		}
		time.Sleep(2 * time.Second)
	}
}

// storeAdminComment puts the summary in the job's AdminComment, after
// what other tools wrote there. A job that has not ended takes it in the
// controller (scontrol update), which keeps its case and hands it to the
// accounting database at the end. An ended job (the EpilogSlurmctld's
// case: Slurm refuses to update it in the controller) takes it only in
// the accounting database (sacctmgr, with slurmdbd), and sacctmgr
// lowercases every value it sets: another tool's text with capitals in it
// would be damaged, so then nothing is stored and the error says why.
func (c *jobCommand) storeAdminComment(s jobs.Summary) error {
	if c.pod != "" {
		return errors.New("--job.admin-comment is for Slurm jobs, not pods")
	}
	ctx := context.Background()
	run := slurm.ExecRunner{Timeout: c.timeout}
	// Both copies: another tool's EpilogSlurmctld may have stored its text
	// in the database, which the controller does not hear of.
	var inController, inDatabase string
	if out, err := run.Run(ctx, c.common.slurm.scontrol, "show", "job", "-o", c.id); err == nil {
		inController = jobs.AdminCommentOf(string(out))
	}
	if out, err := run.Run(ctx, c.sacctmgrNear("sacct"), "-n", "-X", "-P", "-j", c.id, "-o", "AdminComment"); err == nil {
		// A requeued job has a line per run: the last is this one's.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		inDatabase = lines[len(lines)-1]
	}
	ours := jobs.AdminComment(s)
	comment := jobs.MergeAdminComment(jobs.CombineAdminComments(inController, inDatabase), ours)
	_, ctlErr := run.Run(ctx, c.common.slurm.scontrol, "update", "JobId="+c.id, "AdminComment="+comment)
	if ctlErr != nil {
		comment = jobs.MergeAdminComment(jobs.CombineAdminComments(inDatabase, inController), ours)
		if strings.ToLower(comment) != comment {
			return fmt.Errorf("storing the AdminComment: scontrol: %v; sacctmgr: not tried: it lowercases what it sets, and the comment holds other text with capitals (%q) that it would damage: the summary stays in the nodes' records (gpuwatch job %s)", ctlErr, comment, c.id)
		}
		if _, err := run.Run(ctx, c.sacctmgrNear("sacctmgr"), "-i", "update", "job", "where", "jobid="+c.id, "set", "AdminComment="+comment); err != nil {
			return fmt.Errorf("storing the AdminComment: scontrol: %v; sacctmgr: %w", ctlErr, err)
		}
	}
	_, err := fmt.Fprintln(c.out, comment)
	return err
}

// sacctmgrNear is a Slurm command beside --slurm.scontrol-path (same
// directory), or on PATH.
func (c *jobCommand) sacctmgrNear(name string) string {
	if dir := filepath.Dir(c.common.slurm.scontrol); dir != "." {
		return filepath.Join(dir, name)
	}
	return name
}

// fromNodes asks every node of the job, in parallel, for its records.
func (c *jobCommand) fromNodes() (recs []jobs.Record, missing []string, unreachable bool, err error) {
	if !strings.Contains(c.nodeURL, "{node}") {
		return nil, nil, false, fmt.Errorf("--job.node-url=%q: needs {node} where the node name goes", c.nodeURL)
	}
	nodes, err := c.jobNodes()
	if err != nil {
		return nil, nil, false, err
	}
	rt, err := report.NewRoundTripper(c.httpConfig, "gpuwatch-job")
	if err != nil {
		return nil, nil, false, fmt.Errorf("--job.http-config: %w", err)
	}
	client := &http.Client{Transport: rt, Timeout: c.timeout}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Go(func() {
			got, err := c.askNode(client, node)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				missing = append(missing, fmt.Sprintf("%s: %v", node, err))
				unreachable = unreachable || !errors.Is(err, errNoRecord)
				return
			}
			recs = append(recs, got...)
		})
	}
	wg.Wait()
	slices.Sort(missing)
	return recs, missing, unreachable, nil
}

// jobNodes is --job.nodes, else the job's node list from scontrol.
func (c *jobCommand) jobNodes() ([]string, error) {
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
	out, err := slurm.ExecRunner{Timeout: c.timeout}.Run(context.Background(), c.common.slurm.scontrol, "show", "job", "-d", "-o", c.id)
	if err != nil {
		return nil, fmt.Errorf("the job's nodes (give --job.nodes once Slurm has forgotten the job): %w", err)
	}
	js, err := slurm.ParseScontrolJobs(out)
	if err != nil {
		return nil, err
	}
	for _, j := range js {
		if j.ID == c.id && len(j.Nodes) > 0 {
			return j.Nodes, nil
		}
	}
	return nil, fmt.Errorf("scontrol show job %s lists no nodes (give --job.nodes)", c.id)
}

// askNode fetches the job's records from one node's /api/v1/jobs.
func (c *jobCommand) askNode(client *http.Client, node string) ([]jobs.Record, error) {
	base := strings.TrimRight(strings.ReplaceAll(c.nodeURL, "{node}", url.PathEscape(node)), "/")
	u := base + "/api/v1/jobs/" + url.PathEscape(c.id)
	if c.pod != "" {
		u = base + "/api/v1/jobs?kind=pod&pod=" + url.QueryEscape(c.pod)
	}
	resp, err := client.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, errNoRecord
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("%s: %s (check --job.http-config's credentials)", u, resp.Status)
	default:
		return nil, fmt.Errorf("%s: %s", u, resp.Status)
	}
	var doc jobs.ListDoc // JobDoc has the same records field
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	var out []jobs.Record
	for _, r := range doc.Records {
		if c.matches(r) {
			r.Node = node // the name the job's node list uses
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, errNoRecord
	}
	return out, nil
}
