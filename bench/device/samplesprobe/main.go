//go:build cgo

// Command samplesprobe asks a real driver how it answers
// nvmlDeviceGetProcessUtilization, the call the accounting integrates
// (docs/accounting.md), to settle what nvml.h leaves open and what
// --accounting.interval depends on:
//
//   - how often the driver takes a sample of each busy process (the gaps
//     between the time stamps of its successive samples);
//   - whether a read gives one sample per process or every sample newer
//     than lastSeenTimeStamp;
//   - whether that one sample is the newest period's value or the mean of
//     the periods since lastSeenTimeStamp (so that a read every N seconds
//     integrates as well as one every 2);
//   - how far back the driver's buffer reaches (lastSeenTimeStamp 0);
//   - whether a process that ended is still answered for its last
//     periods at the next read (ended.go).
//
// It polls one GPU every -poll with lastSeenTimeStamp at the newest sample
// seen (the incremental history), and every -depth-every asks again with
// lastSeenTimeStamp at now minus each of -depths and at 0. lastSeenTimeStamp
// is only a filter (the driver keeps nothing per caller), so the answer for
// now minus D is what a reader ticking every D gets. Each such answer is set
// against the incremental history of the same window: the newest sample in
// it, and the mean of its samples.
//
// It talks to libnvidia-ml.so.1 through go-nvml alone, not through
// gpuwatch's reader, so that what it records is the driver's answer.
// bench/device/accounting.sh runs it on a lent GPU beside two loads; it
// runs against the fake library too (test/e2e). Build it with cgo, as
// gpuwatch:
//
//	go build -ldflags=-extldflags=-Wl,-z,lazy -o build/device/samplesprobe ./bench/device/samplesprobe
//	samplesprobe -out DIR [-device 0] [-duration 100s] [-poll 100ms] [-depths 1s,2s,4s,8s,16s,32s,64s] [-depth-every 10s]
//
// It writes DIR/incremental.csv (every sample of every poll), DIR/depth.csv
// (every sample of every window's answer) and DIR/summary.txt, which it
// also prints.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

type options struct {
	out        string
	device     int
	duration   time.Duration
	poll       time.Duration
	depths     []time.Duration
	depthEvery time.Duration
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "samplesprobe:", err)
		os.Exit(2)
	}
	if err := run(opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "samplesprobe:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("samplesprobe", flag.ContinueOnError)
	var o options
	var depths string
	fs.StringVar(&o.out, "out", "", "directory for incremental.csv, depth.csv and summary.txt (required)")
	fs.IntVar(&o.device, "device", 0, "index of the GPU to probe")
	fs.DurationVar(&o.duration, "duration", 100*time.Second, "how long to probe")
	fs.DurationVar(&o.poll, "poll", 100*time.Millisecond, "period of the incremental reads (lastSeenTimeStamp: the newest sample seen)")
	fs.StringVar(&depths, "depths", "1s,2s,4s,8s,16s,32s,64s", "windows of the depth reads (lastSeenTimeStamp: now minus each), comma-separated; lastSeenTimeStamp 0 is always read too")
	fs.DurationVar(&o.depthEvery, "depth-every", 10*time.Second, "period of the depth reads")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.out == "" {
		return o, errors.New("-out is required")
	}
	if o.poll <= 0 || o.depthEvery <= 0 || o.duration <= 0 {
		return o, errors.New("-poll, -depth-every and -duration must be positive")
	}
	for s := range strings.SplitSeq(depths, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return o, fmt.Errorf("-depths: %q is not a positive duration", s)
		}
		o.depths = append(o.depths, d)
	}
	return o, nil
}

func run(o options, stdout io.Writer) error {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlInit: %s", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	dev, ret := nvml.DeviceGetHandleByIndex(o.device)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d: %s", o.device, nvml.ErrorString(ret))
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	rec, err := newRecorder(o.out)
	if err != nil {
		return err
	}
	p := &probe{dev: dev, rec: rec}
	probeErr := p.loop(o)
	if err := rec.close(); err != nil {
		return err
	}
	if probeErr != nil {
		return probeErr
	}
	var ended strings.Builder
	p.ends.summarize(&ended, p.startMicros)
	summary := summarize(p.incremental, p.windows, time.Duration(p.clockAhead)*time.Microsecond, o) + ended.String() + failures(p.failed)
	if err := os.WriteFile(filepath.Join(o.out, "summary.txt"), []byte(summary), 0o644); err != nil {
		return err
	}
	_, err = io.WriteString(stdout, summary)
	return err
}

// probe reads one GPU and keeps what it read.
type probe struct {
	dev         nvml.Device
	rec         *recorder
	newest      uint64 // the newest sample time seen by the incremental reads
	incremental []sample
	windows     []window
	// failed counts the reads the driver refused, by its answer: a probe
	// on a lent GPU goes on past one, and says so in its summary.
	failed map[string]int
	// clockAhead is how far the driver's sample times run ahead of the
	// wall clock: the most any sample's time exceeded its read's (a real
	// driver stamps samples with the CPU's clock, so it is a fraction of a
	// sample period behind; the fake library's simulated clock starts
	// elsewhere). A window's lastSeenTimeStamp is taken on the driver's
	// clock.
	clockAhead int64
	clockKnown bool
	// ends follows the process list for processes that end (ended.go);
	// startMicros is the probe's start, wall clock.
	ends        endWatch
	startMicros uint64
}

// sample is one of the driver's samples, with when it was read.
type sample struct {
	readMicros uint64
	pid        uint32
	micros     uint64
	sm, mem    uint32
}

// window is one depth read: the driver's answer for samples newer than
// since (0: all), read at readMicros; now is the read's time on the
// driver's clock.
type window struct {
	depth      time.Duration // 0 for lastSeenTimeStamp 0
	readMicros uint64
	now        uint64
	since      uint64
	samples    []sample
}

func (p *probe) loop(o options) error {
	start := time.Now()
	p.startMicros = uint64(start.UnixMicro())
	nextDepth := start.Add(o.poll / 2) // a first depth read at once, after the first poll
	for time.Since(start) < o.duration {
		if err := p.pollOnce(); err != nil {
			return err
		}
		if time.Now().After(nextDepth) {
			if err := p.depthReads(o.depths); err != nil {
				return err
			}
			nextDepth = time.Now().Add(o.depthEvery)
		}
		time.Sleep(o.poll)
	}
	return nil
}

func (p *probe) pollOnce() error {
	got, readAt, err := p.read(p.newest)
	if err != nil {
		p.fail(err)
		return nil
	}
	for _, s := range got {
		p.newest = max(p.newest, s.micros)
		p.incremental = append(p.incremental, s)
		ahead := int64(s.micros) - int64(readAt)
		if !p.clockKnown || ahead > p.clockAhead {
			p.clockAhead, p.clockKnown = ahead, true
		}
	}
	p.ends.poll(p.dev, readAt, got, p.driverClock)
	p.ends.due(readAt, func(since uint64) ([]sample, error) {
		got, _, err := p.read(since)
		if err != nil {
			p.fail(err)
		}
		return got, err
	})
	return p.rec.incremental(readAt, got)
}

func (p *probe) depthReads(depths []time.Duration) error {
	for _, d := range append([]time.Duration{0}, depths...) {
		var since uint64
		if d > 0 {
			since = uint64(max(0, p.driverClock(time.Now().UnixMicro())-d.Microseconds()))
		}
		got, readAt, err := p.read(since)
		if err != nil {
			p.fail(err)
			continue
		}
		w := window{depth: d, readMicros: readAt, now: uint64(max(0, p.driverClock(int64(readAt)))), since: since, samples: got}
		p.windows = append(p.windows, w)
		if err := p.rec.window(w); err != nil {
			return err
		}
	}
	return nil
}

func (p *probe) fail(err error) {
	if p.failed == nil {
		p.failed = map[string]int{}
	}
	p.failed[err.Error()]++
}

// driverClock is wall-clock time wallMicros on the driver's clock.
func (p *probe) driverClock(wallMicros int64) int64 { return wallMicros + p.clockAhead }

// read asks for the samples newer than since. NOT_FOUND (no sample in the
// window) is an empty answer; a buffer outgrown between the size query and
// the read (INSUFFICIENT_SIZE) is asked again.
func (p *probe) read(since uint64) ([]sample, uint64, error) {
	for attempt := 0; ; attempt++ {
		readAt := uint64(time.Now().UnixMicro())
		raw, ret := p.dev.GetProcessUtilization(since)
		switch {
		case ret == nvml.SUCCESS:
			out := make([]sample, 0, len(raw))
			for _, r := range raw {
				out = append(out, sample{readMicros: readAt, pid: r.Pid, micros: r.TimeStamp, sm: r.SmUtil, mem: r.MemUtil})
			}
			return out, readAt, nil
		case ret == nvml.ERROR_NOT_FOUND:
			return nil, readAt, nil
		case ret == nvml.ERROR_INSUFFICIENT_SIZE && attempt < 3:
			continue
		default:
			return nil, readAt, fmt.Errorf("nvmlDeviceGetProcessUtilization: %s", nvml.ErrorString(ret))
		}
	}
}
