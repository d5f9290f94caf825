//go:build cgo

package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// A driver in trouble, as seen in the field: calls that answer slowly,
// readings that are the driver's "unavailable" sentinels or impossible,
// and an energy counter that starts again (a driver reload). Each is a
// fault key, so that the NVML reader, over the Go simulator and over the
// fake libnvidia-ml.so.1, meets them unchanged.

// sickKeys names the fault keys of this file, for the "a fault needs"
// error.
const sickKeys = "slow_calls, bogus_values or energy_reset_at"

// Bogus readings (Fault.BogusValues) and what each answers.
const (
	// GetTemperature: 0xFFFFFFFF °C, the driver's "unavailable".
	bogusTemperature = "temperature"
	// GetPowerUsage: 0xFFFFFFFF mW (4 294 967 W).
	bogusPower = "power"
	// GetClockInfo (current clocks): 0xFFFFFFFF MHz.
	bogusClocks = "clocks"
	// GetUtilizationRates: 255 % GPU and memory utilization.
	bogusUtilization = "utilization"
	// GetMemoryInfo(_v2): used 1 GiB above total, free the wrapped
	// total-used (about 1.8e19 bytes).
	bogusMemory = "memory"
	// GetPerformanceState: -1 (0xFFFFFFFF as a signed pstate).
	bogusPState = "pstate"
	// GetFanSpeed(_v2): 0xFFFFFFFF %.
	bogusFanSpeed = "fan_speed"
	// The process lists: every process's used memory is 2^63 bytes, more
	// than any GPU has, and two of them overflow a 64-bit sum.
	bogusProcessMemory = "process_memory"
)

var bogusNames = []string{bogusTemperature, bogusPower, bogusClocks, bogusUtilization, bogusMemory, bogusPState, bogusFanSpeed, bogusProcessMemory}

// BogusValueNames lists the names bogus_values accepts.
func BogusValueNames() []string { return slices.Clone(bogusNames) }

const (
	sentinel32         = math.MaxUint32
	impossibleProcessB = 1 << 63
)

func (f *Fault) sick() bool {
	return f.SlowCalls != nil || len(f.BogusValues) > 0 || f.EnergyResetAt != nil
}

func (f *Fault) checkSick() error {
	for _, name := range f.BogusValues {
		if !slices.Contains(bogusNames, name) {
			return fmt.Errorf("bogus_values: unknown reading %q (known: %s)", name, strings.Join(bogusNames, ", "))
		}
	}
	return nil
}

// sickness is one device's sick-driver faults; the zero value is healthy.
type sickness struct {
	callDelay     time.Duration
	bogus         []string
	energyReset   time.Duration
	energyResetOn bool
}

func (s *sickness) apply(f *Fault) {
	if f.SlowCalls != nil {
		s.callDelay = f.SlowCalls.D()
	}
	s.bogus = append(s.bogus, f.BogusValues...)
	if f.EnergyResetAt != nil {
		s.energyReset, s.energyResetOn = f.EnergyResetAt.D(), true
	}
}

// slow makes a call take the configured time.
func (s *sickness) slow() {
	if s.callDelay > 0 {
		time.Sleep(s.callDelay)
	}
}

// isBogus says whether reading name answers a bogus value.
func (s *sickness) isBogus(name string) bool { return slices.Contains(s.bogus, name) }

// energySinceReload is the driver's energy counter at elapsed seconds t,
// given the energy since the driver's load: after a reset the counter
// starts again from 0.
func (s *sickness) energySinceReload(t float64, energyJ func(float64) float64) float64 {
	if !s.energyResetOn || t < s.energyReset.Seconds() {
		return energyJ(t)
	}
	return energyJ(t) - energyJ(s.energyReset.Seconds())
}
