//go:build linux

// Command uihistory measures the live page at the most history gpuwatch
// keeps (--ui.history=24h at --ui.interval=1s: 86 400 samples) on a full
// window: it records a day of 8 GPUs and 64 owners into the page's
// recorder (internal/webui, the code gpuwatch serves), keeps recording
// every interval, serves the page and its API on loopback, and opens the
// page in headless Chromium for a while. It prints the size of the whole
// history, the bytes served, and the CPU time of this server and of
// Chromium (all its processes) while the page was open.
//
//	go run ./bench/uihistory -seconds 60
//
// Server CPU is this process's (recording, encoding, serving); it does
// not include the simulator's collection, which is the same with or
// without a page and is measured by bench/ui-cpu.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/selfstats"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/webui"
)

// synthetic makes snapshots of gpus GPUs and owners Slurm jobs, one
// process each, with readings that move.
type synthetic struct{ gpus, owners int }

func (s synthetic) at(t time.Time) *snapshot.Snapshot {
	sec := t.Unix()
	snap := &snapshot.Snapshot{Time: t}
	for i := range s.gpus {
		u := float64((sec+int64(i)*7)%100) / 100
		snap.Devices = append(snap.Devices, snapshot.Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Up: true,
			Utilization: snapshot.Utilization{GPU: snapshot.Some(u)},
			Memory:      snapshot.Memory{Total: snapshot.Some[uint64](80 << 30), Used: snapshot.Some(uint64(10+u*60) << 30)},
			Power:       snapshot.Power{Usage: snapshot.Some(100 + 600*u)}, Temperature: snapshot.Temperature{GPU: snapshot.Some(40 + 40*u)}})
	}
	for i := range s.owners {
		snap.Processes = append(snap.Processes, snapshot.Process{GPU: i % s.gpus, PID: uint32(1000 + i), Type: "compute",
			UsedMemory: snapshot.Some(uint64(1+(sec+int64(i))%8) << 30), SMUtilization: snapshot.Some(float64((sec+int64(i))%10) / 10),
			Owner: snapshot.Owner{User: "user" + strconv.Itoa(i%16), Slurm: snapshot.SlurmJob{JobID: strconv.Itoa(4000 + i)}}})
	}
	return snap
}

func (s synthetic) Snapshot(context.Context) (*snapshot.Snapshot, error) {
	return s.at(time.Now()), nil
}

// countingWriter counts the bytes of the API's answers.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(b []byte) (int, error) {
	w.n.Add(int64(len(b)))
	return w.ResponseWriter.Write(b)
}

// cpuSeconds is the user+system CPU of the processes in process group
// pgid, their reaped children included (/proc/PID/stat fields 14-17).
func cpuSeconds(pgid int) float64 {
	hz := 100.0 // USER_HZ: 100 on every Linux this runs on
	var ticks float64
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command, which is in parentheses and may hold spaces.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if len(f) < 15 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		for _, i := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseFloat(f[i], 64)
			ticks += v
		}
	}
	return ticks / hz
}

// selfCPU is the process's CPU seconds so far; 0 if they cannot be read.
func selfCPU() float64 {
	cpu, _ := selfstats.CPUTime()
	return cpu.Seconds()
}

func main() {
	interval := flag.Duration("interval", time.Second, "--ui.interval")
	history := flag.Duration("history", 24*time.Hour, "--ui.history")
	gpus := flag.Int("gpus", 8, "GPUs")
	owners := flag.Int("owners", webui.MaxOwners, "owners (a Slurm job each), all running for the whole window")
	seconds := flag.Int("seconds", 60, "how long the page stays open")
	chromium := flag.String("chromium", "chromium", "Chromium binary")
	flag.Parse()

	src := synthetic{gpus: *gpus, owners: *owners}
	rec, err := webui.NewRecorder(src, *interval, *history)
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	t0 := time.Now()
	for t := now.Add(-*history); t.Before(now); t = t.Add(*interval) {
		rec.Record(src.at(t), nil)
	}
	log.Printf("recorded %s at %s (%d collections) in %s", *history, *interval, int(*history / *interval), time.Since(t0).Round(time.Millisecond))
	encodeStart := time.Now()
	full, err := rec.HistoryJSON(-1)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("whole history: %d bytes, encoded in %s", len(full), time.Since(encodeStart).Round(time.Millisecond))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rec.Run(ctx)
	var served atomic.Int64
	var requests atomic.Int64
	ui := webui.Handler(rec, webui.Options{TelemetryPath: "/metrics"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			ui.ServeHTTP(countingWriter{w, &served}, r)
		}))
	}()

	profile, err := os.MkdirTemp("", "uihistory-chromium")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(profile)
	cmd := exec.Command(*chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+profile,
		"http://"+ln.Addr().String()+"/")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
	// Let the page load the whole history once before measuring.
	time.Sleep(5 * time.Second)
	pgid := cmd.Process.Pid
	serverCPU, browserCPU, bytes0, req0 := selfCPU(), cpuSeconds(pgid), served.Load(), requests.Load()
	start := time.Now()
	time.Sleep(time.Duration(*seconds) * time.Second)
	wall := time.Since(start).Seconds()
	serverCPU, browserCPU = selfCPU()-serverCPU, cpuSeconds(pgid)-browserCPU
	fmt.Printf("--ui.interval=%s --ui.history=%s, %d GPUs + %d owners, page open %.0f s: whole history %d bytes; "+
		"served %d requests, %.1f KB/s; server %.2f %% of a core, Chromium %.2f %% of a core\n",
		*interval, *history, *gpus, *owners, wall, len(full), requests.Load()-req0, float64(served.Load()-bytes0)/wall/1000,
		100*serverCPU/wall, 100*browserCPU/wall)
}
