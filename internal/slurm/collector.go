package slurm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/internal/labelvalue"
)

// Options configure the Slurm cluster collector. The zero value of every
// field means its default.
type Options struct {
	SqueuePath   string        // default "squeue" (looked up in PATH)
	SinfoPath    string        // default "sinfo"
	SdiagPath    string        // default "sdiag"
	ScontrolPath string        // default "scontrol" (used by JobLookup)
	Timeout      time.Duration // per command; default 10 s
	PollInterval time.Duration // how long one invocation's answer serves scrapes; default 30 s
	// Format is "auto" (default: JSON, falling back to formatted text when
	// the command does not know --json), "json" or "text".
	Format string
	// SkipSdiag turns off the scheduler health metrics.
	SkipSdiag bool
	// MaxOutput bounds the bytes one command may print; default
	// DefaultMaxOutput.
	MaxOutput int64
	// Runner runs the commands; default ExecRunner{Timeout, MaxOutput}.
	Runner CommandRunner
	Logger *slog.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// DefaultPollInterval is how long one answer serves scrapes.
const DefaultPollInterval = 30 * time.Second

// Command names used as the "command" label.
const (
	cmdSqueue = "squeue"
	cmdSinfo  = "sinfo"
	cmdSdiag  = "sdiag"
)

func (o *Options) setDefaults() error {
	if o.SqueuePath == "" {
		o.SqueuePath = "squeue"
	}
	if o.SinfoPath == "" {
		o.SinfoPath = "sinfo"
	}
	if o.SdiagPath == "" {
		o.SdiagPath = "sdiag"
	}
	if o.ScontrolPath == "" {
		o.ScontrolPath = "scontrol"
	}
	if o.Timeout < 0 {
		return fmt.Errorf("slurm: timeout %v is negative", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.PollInterval < 0 {
		return fmt.Errorf("slurm: poll interval %v is negative", o.PollInterval)
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	switch o.Format {
	case "":
		o.Format = "auto"
	case "auto", "json", "text":
	default:
		return fmt.Errorf("slurm: format %q: want auto, json or text", o.Format)
	}
	if o.MaxOutput < 0 {
		return fmt.Errorf("slurm: max output %d is negative", o.MaxOutput)
	}
	if o.Runner == nil {
		o.Runner = ExecRunner{Timeout: o.Timeout, MaxOutput: o.MaxOutput}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Collector exports cluster-wide Slurm metrics from squeue, sinfo and
// sdiag. It is meant for the controller or a login node
// (--collector.slurm). Each command runs at most once per PollInterval
// whatever the number of scrapers.
type Collector struct {
	opts  Options
	descs map[string]*prometheus.Desc

	squeue, sinfo, sdiag *pollCache
	// textMode is set per command once it has shown it does not know
	// --json (Format "auto").
	squeueText, sinfoText atomic.Bool

	mu          sync.Mutex
	errors      map[string]uint64
	lastSuccess map[string]time.Time
}

// NewCollector checks the options and returns a collector. It runs nothing
// until the first scrape.
func NewCollector(opts Options) (*Collector, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	c := &Collector{
		opts:        opts,
		descs:       descs(),
		errors:      map[string]uint64{cmdSqueue: 0, cmdSinfo: 0, cmdSdiag: 0},
		lastSuccess: map[string]time.Time{},
	}
	c.squeueText.Store(opts.Format == "text")
	c.sinfoText.Store(opts.Format == "text")
	c.squeue = c.newCache(cmdSqueue, c.fetchJobs)
	c.sinfo = c.newCache(cmdSinfo, c.fetchNodes)
	c.sdiag = c.newCache(cmdSdiag, c.fetchDiag)
	return c, nil
}

func (c *Collector) newCache(name string, fetch func(context.Context) (any, error)) *pollCache {
	return &pollCache{
		interval: c.opts.PollInterval,
		now:      c.opts.Now,
		fetch:    fetch,
		onResult: func(r cachedResult) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if r.Err != nil {
				c.errors[name]++
				c.opts.Logger.Warn("slurm command failed", "command", name, "err", r.Err)
				return
			}
			c.lastSuccess[name] = r.At
		},
	}
}

// jsonUnsupported says whether a failed --json invocation means the
// command predates --json (Slurm < 21.08), as opposed to any other failure.
func jsonUnsupported(err error) bool {
	var ce *CommandError
	if !errors.As(err, &ce) || ce.TimedOut {
		return false
	}
	s := strings.ToLower(ce.Stderr + " " + ce.Err.Error())
	return strings.Contains(s, "unrecognized option") || strings.Contains(s, "invalid option") ||
		strings.Contains(s, "unknown option")
}

func (c *Collector) fetchJobs(ctx context.Context) (any, error) {
	return fetchListing(ctx, c, listing[Job]{"squeue", c.opts.SqueuePath, SqueueFormattedArgs, ParseSqueueJSON, ParseSqueueFormatted, &c.squeueText})
}

func (c *Collector) fetchNodes(ctx context.Context) (any, error) {
	return fetchListing(ctx, c, listing[NodeRecord]{"sinfo", c.opts.SinfoPath, SinfoFormattedArgs, ParseSinfoJSON, ParseSinfoFormatted, &c.sinfoText})
}

// listing is a Slurm command that lists records as JSON (Slurm >= 21.08)
// or, on an older Slurm, as formatted text.
type listing[T any] struct {
	name, path         string
	textArgs           []string
	fromJSON, fromText func([]byte) ([]T, error)
	// text is set once the command turned out not to know --json (or
	// --slurm.format=text asked for text): it is not asked again.
	text *atomic.Bool
}

// fetchListing runs l with --json, falling back for good to the formatted
// text when this Slurm does not know --json (unless --slurm.format=json).
func fetchListing[T any](ctx context.Context, c *Collector, l listing[T]) (any, error) {
	if !l.text.Load() {
		out, err := c.opts.Runner.Run(ctx, l.path, "--json")
		if err == nil {
			return l.fromJSON(out)
		}
		if c.opts.Format == "json" || !jsonUnsupported(err) {
			return nil, err
		}
		c.opts.Logger.Info(l.name+" does not know --json; using formatted output", "err", err)
		l.text.Store(true)
	}
	out, err := c.opts.Runner.Run(ctx, l.path, l.textArgs...)
	if err != nil {
		return nil, err
	}
	return l.fromText(out)
}

func (c *Collector) fetchDiag(ctx context.Context) (any, error) {
	out, err := c.opts.Runner.Run(ctx, c.opts.SdiagPath)
	if err != nil {
		return nil, err
	}
	return ParseSdiag(out)
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It returns within about the
// command timeout even when a command hangs.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout+2*time.Second)
	defer cancel()

	caches := map[string]*pollCache{cmdSqueue: c.squeue, cmdSinfo: c.sinfo}
	if !c.opts.SkipSdiag {
		caches[cmdSdiag] = c.sdiag
	}
	results := make(map[string]cachedResult, len(caches))
	var wg sync.WaitGroup
	var rmu sync.Mutex
	for name, pc := range caches {
		wg.Go(func() {
			r := pc.get(ctx)
			rmu.Lock()
			results[name] = r
			rmu.Unlock()
		})
	}
	wg.Wait()

	if r := results[cmdSqueue]; r.Err == nil {
		c.emitJobs(ch, r.Value.([]Job))
	}
	if r := results[cmdSinfo]; r.Err == nil {
		c.emitNodes(ch, r.Value.([]NodeRecord))
	}
	if r, ok := results[cmdSdiag]; ok && r.Err == nil {
		c.emitDiag(ch, r.Value.(Diag))
	}
	c.emitSelf(ch, results)
}

func (c *Collector) gauge(ch chan<- prometheus.Metric, name string, v float64, labels ...string) {
	// Slurm names come from users (accounts, partitions, reasons): bounded
	// and made valid UTF-8, which MustNewConstMetric would panic on.
	for i, l := range labels {
		labels[i] = labelvalue.Bound(l)
	}
	ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, labels...)
}

// labelKey joins label values, each bounded and made valid UTF-8 first
// (labelvalue.Bound): a Slurm name is chosen by users and may hold any
// byte, but valid UTF-8 never holds \xff, the separator.
func labelKey(v ...string) string {
	for i := range v {
		v[i] = labelvalue.Bound(v[i])
	}
	return strings.Join(v, "\xff")
}

func splitKey(k string) []string { return strings.Split(k, "\xff") }

// emitCounts sends one gauge per key of m, in a stable order.
func (c *Collector) emitCounts(ch chan<- prometheus.Metric, name string, m map[string]int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.gauge(ch, name, float64(m[k]), splitKey(k)...)
	}
}

func (c *Collector) emitJobs(ch chan<- prometheus.Metric, jobs []Job) {
	byState := map[string]int{}
	pending := map[string]int{}
	gpusHeld := map[string]int{}
	gpusPending := map[string]int{}
	for i := range jobs {
		j := &jobs[i]
		byState[labelKey(strings.ToLower(j.State), j.Partition, j.User, j.Account)]++
		switch {
		case j.State == "PENDING":
			pending[labelKey(j.Reason, j.Partition)]++
			for _, g := range j.GPUs {
				gpusPending[labelKey(j.Partition, g.Type)] += g.Count
			}
		case j.HoldsResources():
			for _, g := range j.GPUs {
				gpusHeld[labelKey(j.User, j.Account, j.Partition, g.Type)] += g.Count
			}
		}
	}
	c.emitCounts(ch, mJobs, byState)
	c.emitCounts(ch, mJobsPending, pending)
	c.emitCounts(ch, mGPUsAllocated, gpusHeld)
	c.emitCounts(ch, mGPUsPending, gpusPending)
}

// gpuStates splits GPUs per type into allocated, idle and other (idle GPUs
// of a node that cannot run jobs).
func gpuStates(total, used []GPUCount, available bool) map[string][4]int {
	out := map[string][4]int{} // allocated, idle, other, total
	for _, g := range total {
		v := out[g.Type]
		v[3] += g.Count
		out[g.Type] = v
	}
	for _, g := range used {
		v := out[g.Type]
		v[0] += g.Count
		out[g.Type] = v
	}
	for t, v := range out {
		free := max(v[3]-v[0], 0)
		if available {
			v[1] = free
		} else {
			v[2] = free
		}
		out[t] = v
	}
	return out
}

var stateNames = [4]string{"allocated", "idle", "other", "total"}

func (c *Collector) emitNodes(ch chan<- prometheus.Metric, recs []NodeRecord) {
	nodes := map[string]int{}
	partCPUs := map[string]int{}
	partGPUs := map[string]int{}
	nodeCPUs := map[string]int{}
	nodeGPUs := map[string]int{}
	seenNode := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		nodes[labelKey(r.State, r.Partition)] += r.NodeCount
		cpu := [4]int{r.CPUs.Allocated, r.CPUs.Idle, r.CPUs.Other, r.CPUs.Total}
		gpus := gpuStates(r.GPUsTotal, r.GPUsUsed, stateAvailable(r.State))
		for s, name := range stateNames {
			partCPUs[labelKey(r.Partition, name)] += cpu[s]
			for t, v := range gpus {
				partGPUs[labelKey(r.Partition, t, name)] += v[s]
			}
		}
		// Per-node series: once per node, although a node in two
		// partitions has two records; and only from records that are
		// one node.
		if r.Node == "" || seenNode[r.Node] {
			continue
		}
		seenNode[r.Node] = true
		for s, name := range stateNames {
			nodeCPUs[labelKey(r.Node, name)] = cpu[s]
			for t, v := range gpus {
				nodeGPUs[labelKey(r.Node, t, name)] = v[s]
			}
		}
	}
	c.emitCounts(ch, mNodes, nodes)
	c.emitCounts(ch, mNodeCPUs, nodeCPUs)
	c.emitCounts(ch, mNodeGPUs, nodeGPUs)
	c.emitCounts(ch, mPartitionCPUs, partCPUs)
	c.emitCounts(ch, mPartitionGPUs, partGPUs)
}

func (c *Collector) emitDiag(ch chan<- prometheus.Metric, d Diag) {
	for _, f := range []struct {
		name string
		v    Opt
	}{
		{mSchedThreads, d.ServerThreads},
		{mSchedAgentQueue, d.AgentQueueSize},
		{mSchedDBDAgentQueue, d.DBDAgentQueueSize},
		{mSchedQueue, d.QueueLength},
		{mSchedLastCycle, d.LastCycle},
		{mSchedMeanCycle, d.MeanCycle},
		{mSchedMaxCycle, d.MaxCycle},
		{mSchedBFLastCycle, d.BackfillLastCycle},
		{mSchedBFMeanCycle, d.BackfillMeanCycle},
		{mSchedBFQueue, d.BackfillQueueLength},
	} {
		if f.v.Valid {
			c.gauge(ch, f.name, f.v.Value)
		}
	}
	if d.BackfilledJobs.Valid {
		ch <- prometheus.MustNewConstMetric(c.descs[mSchedBackfilledJobs], prometheus.CounterValue, d.BackfilledJobs.Value)
	}
}

func (c *Collector) emitSelf(ch chan<- prometheus.Metric, results map[string]cachedResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range []string{cmdSqueue, cmdSinfo, cmdSdiag} {
		r, ran := results[name]
		if !ran {
			continue
		}
		ok := 0.0
		if r.Err == nil {
			ok = 1
		}
		c.gauge(ch, mCollectorSuccess, ok, name)
		c.gauge(ch, mCollectorDuration, r.Duration.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(c.descs[mCollectorErrors], prometheus.CounterValue, float64(c.errors[name]), name)
		if t, ok := c.lastSuccess[name]; ok {
			c.gauge(ch, mCollectorLastSuccess, float64(t.UnixNano())/1e9, name)
		}
	}
}
