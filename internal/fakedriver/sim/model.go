//go:build cgo

package sim

import (
	"math"
	"time"
)

// The activity model. Every reading is a pure function of the device's
// fixed load (from its processes) and the simulated elapsed time t, so two
// simulators at the same time answer the same, and a pinned clock freezes
// everything.
//
// A busy GPU's utilization follows a smooth wave: a slow 5-minute swell plus
// a faster 47-second ripple, phase-shifted per GPU so the GPUs of a host do
// not move in lockstep. Power, temperature and clocks follow utilization.
// Counters (energy, PCIe and NVLink bytes) are integrals of rates that are
// linear in utilization, computed in closed form, so they only ever grow.

const (
	slowPeriodS = 300.0
	fastPeriodS = 47.0
	slowAmp     = 0.35
	fastAmp     = 0.15
	// uptimeBeforeStart is how long the simulated driver had been loaded
	// (idle) when the simulation starts, so counters start at plausible
	// non-zero values.
	uptimeBeforeStart = 72 * time.Hour
)

var (
	slowOmega = 2 * math.Pi / slowPeriodS
	fastOmega = 2 * math.Pi / fastPeriodS
)

// activity is the fixed part of a device's behaviour.
type activity struct {
	phase float64
	// sm is the base SM activity (sum of its processes' SM utilization,
	// at most 1); 0 means idle. mem is the memory-controller equivalent.
	sm, mem float64
}

// wave is in [0, 1].
func (a *activity) wave(t float64) float64 {
	return 0.5 + slowAmp*math.Sin(slowOmega*t+a.phase) + fastAmp*math.Sin(fastOmega*t+2.3*a.phase)
}

// waveIntegral is the integral of wave from 0 to t.
func (a *activity) waveIntegral(t float64) float64 {
	p1, p2 := a.phase, 2.3*a.phase
	return 0.5*t +
		slowAmp/slowOmega*(math.Cos(p1)-math.Cos(slowOmega*t+p1)) +
		fastAmp/fastOmega*(math.Cos(p2)-math.Cos(fastOmega*t+p2))
}

func (a *activity) busy() bool { return a.sm > 0 }

// waveHeadroom is the share of the headroom above the processes' SM
// activity that the utilization wave fills at its crest.
const waveHeadroom = 0.9

// util is GPU utilization (0–1): at least the processes' SM activity, with
// the wave filling up to waveHeadroom of the headroom.
func (a *activity) util(t float64) float64 {
	if !a.busy() {
		return 0
	}
	return a.sm + (1-a.sm)*waveHeadroom*a.wave(t)
}

// utilIntegral is the integral of util from 0 to t (utilization-seconds).
func (a *activity) utilIntegral(t float64) float64 {
	if !a.busy() {
		return 0
	}
	return a.sm*t + (1-a.sm)*waveHeadroom*a.waveIntegral(t)
}

func (a *activity) memBase() float64 {
	if a.mem > 0 {
		return a.mem
	}
	return 0.5 * a.sm
}

// memUtil is memory-controller utilization (0–1).
func (a *activity) memUtil(t float64) float64 {
	if !a.busy() {
		return 0
	}
	m := a.memBase()
	return m + (1-m)*0.5*a.wave(t)
}

func (a *activity) memUtilIntegral(t float64) float64 {
	if !a.busy() {
		return 0
	}
	m := a.memBase()
	return m*t + (1-m)*0.5*a.waveIntegral(t)
}

// seconds converts an elapsed time to the model's float seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }

// steps counts how many whole periods have passed: a monotone step counter
// used for rare error counters.
func steps(t float64, period float64) uint64 {
	if period <= 0 || t <= 0 {
		return 0
	}
	return uint64(t / period)
}
