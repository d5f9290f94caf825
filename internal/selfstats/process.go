// Package selfstats exports the exporter's own process metrics (CPU, memory,
// file descriptors, start time) under the standard process_* names.
//
// client_golang's process collector reads half a dozen /proc files on every
// scrape, network statistics and the host's boot time among them; profiled
// on a simulated 8-GPU host it was over a third of gpuwatch's CPU per scrape,
// more than reading and rendering the GPUs. This collector asks the kernel
// directly (getrusage, getrlimit, one small read of /proc/self/statm, one
// directory read of /proc/self/fd) and computes the start time once.
package selfstats

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"
)

// ProcessCollector is a prometheus.Collector for the current process.
type ProcessCollector struct {
	cpu, rss, vsize, fds, maxFDs, start *prometheus.Desc
	startTime                           float64
	pageSize                            float64
}

// NewProcessCollector returns the collector. The start time comes from
// procfs once, at construction.
func NewProcessCollector() *ProcessCollector {
	c := &ProcessCollector{
		cpu:      prometheus.NewDesc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", nil, nil),
		rss:      prometheus.NewDesc("process_resident_memory_bytes", "Resident memory size in bytes.", nil, nil),
		vsize:    prometheus.NewDesc("process_virtual_memory_bytes", "Virtual memory size in bytes.", nil, nil),
		fds:      prometheus.NewDesc("process_open_fds", "Number of open file descriptors.", nil, nil),
		maxFDs:   prometheus.NewDesc("process_max_fds", "Maximum number of open file descriptors.", nil, nil),
		start:    prometheus.NewDesc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", nil, nil),
		pageSize: float64(os.Getpagesize()),
	}
	c.startTime = float64(time.Now().Unix())
	if p, err := procfs.Self(); err == nil {
		if st, err := p.Stat(); err == nil {
			if t, err := st.StartTime(); err == nil {
				c.startTime = t
			}
		}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *ProcessCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cpu, c.rss, c.vsize, c.fds, c.maxFDs, c.start} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A reading that fails is left
// out rather than reported as zero.
func (c *ProcessCollector) Collect(ch chan<- prometheus.Metric) {
	if cpu, err := CPUTime(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, cpu.Seconds())
	}
	if vsize, rss, ok := readStatm(); ok {
		ch <- prometheus.MustNewConstMetric(c.vsize, prometheus.GaugeValue, vsize*c.pageSize)
		ch <- prometheus.MustNewConstMetric(c.rss, prometheus.GaugeValue, rss*c.pageSize)
	}
	if n, ok := countFDs(); ok {
		ch <- prometheus.MustNewConstMetric(c.fds, prometheus.GaugeValue, n)
	}
	if n, ok := maxFDs(); ok {
		ch <- prometheus.MustNewConstMetric(c.maxFDs, prometheus.GaugeValue, n)
	}
	ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, c.startTime)
}

// readStatm returns the virtual and resident sizes in pages.
func readStatm() (vsize, rss float64, ok bool) {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, 0, false
	}
	f := bytes.Fields(data)
	if len(f) < 2 {
		return 0, 0, false
	}
	v, err1 := strconv.ParseFloat(string(f[0]), 64)
	r, err2 := strconv.ParseFloat(string(f[1]), 64)
	return v, r, err1 == nil && err2 == nil
}

func countFDs() (float64, bool) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, false
	}
	// The directory handle itself is one of the entries.
	return float64(len(names) - 1), true
}
