// Command wakecost measures what waking an otherwise idle Go process
// costs on this host: it ticks every -interval for -duration, doing
// nothing at each tick, and prints its own CPU time (user and system,
// every thread) per tick. That cost is the Go runtime's (a timer firing,
// a thread woken, the scheduler looking for work, sysmon) and the
// host's (a futex or a timer interrupt on a virtual machine), and an
// accounting tick pays it on top of its own work: bench/RESULTS.md sets it
// against --accounting.interval and the accounting's cost target.
//
//	go run ./bench/wakecost -interval 2s -duration 2m
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/selfstats"
)

func main() {
	interval := flag.Duration("interval", 2*time.Second, "time between wake-ups")
	duration := flag.Duration("duration", 2*time.Minute, "how long to tick")
	flag.Parse()
	if *interval <= 0 || *duration < *interval {
		fmt.Fprintln(os.Stderr, "wakecost: -interval must be positive and -duration at least one interval")
		os.Exit(2)
	}
	// Settle first: start-up's CPU is not a wake-up's.
	time.Sleep(*interval)
	start, err := selfstats.CPUTime()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wakecost:", err)
		os.Exit(1)
	}
	ticker := time.NewTicker(*interval)
	wakes := 0
	for end := time.Now().Add(*duration); time.Now().Before(end); wakes++ {
		<-ticker.C
	}
	ticker.Stop()
	end, err := selfstats.CPUTime()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wakecost:", err)
		os.Exit(1)
	}
	cpu := end - start
	fmt.Printf("%d wake-ups every %v: %v of CPU, %.0f µs a wake-up, %.2f ms a minute\n",
		wakes, *interval, cpu, float64(cpu.Microseconds())/float64(wakes),
		float64(cpu.Microseconds())/1000/duration.Minutes())
}
