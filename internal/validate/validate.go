// Package validate drops readings that no GPU can produce before they
// enter a snapshot: the driver's "unavailable" sentinels (0xFFFFFFFF
// where a 32-bit value is missing, 0xFFFFFFFFFFFFFFFF for a 64-bit one)
// and physically impossible values. A dropped reading becomes absent, as
// an unsupported one is, and is counted by field, so that an operator
// sees a sick driver in gpuwatch_readings_dropped_total{field} instead of
// a GPU at 4 294 967 295 °C.
//
// It also keeps the driver's energy counter monotonic: when the counter
// starts again (a driver reload), an offset carries the energy counted so
// far, so the exported counter never goes down and rate() stays right.
//
// The limits are wide on purpose: they catch what cannot be, never an
// unusual but real reading.
package validate

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// Limits of a physically possible reading.
const (
	// MaxCelsius: silicon is shut down by its own protection well below
	// this (shutdown thresholds are about 90-100 °C).
	MaxCelsius = 200
	// PowerOverMaxLimit: a board draws at most briefly above its maximum
	// settable power limit; twice that is no real draw.
	PowerOverMaxLimit = 2
	// MaxWatts bounds a power reading when the board reports no limit: no
	// single GPU board draws 10 kW.
	MaxWatts = 10_000
	// ClockOverMax: no clock runs at twice its reported maximum.
	ClockOverMax = 2
	// MaxHertz bounds a clock when the device reports no maximum (and a
	// maximum itself): no GPU clock runs at 20 GHz.
	MaxHertz = 20e9
	// MaxJoules bounds the energy counter: 2^63 mJ, the top half of the
	// 64-bit range, is where the driver's sentinels live; a GPU at 1 kW
	// would need 290 000 years to count that far.
	MaxJoules = float64(1<<63) / 1000
)

// Field names counted in gpuwatch_readings_dropped_total{field}.
const (
	FieldTemperature   = "temperature"
	FieldPower         = "power"
	FieldEnergy        = "energy"
	FieldUtilization   = "utilization"
	FieldMemory        = "memory"
	FieldClock         = "clock"
	FieldPState        = "performance_state"
	FieldFanSpeed      = "fan_speed"
	FieldProcessMemory = "process_memory"
	FieldPCIe          = "pcie"
	FieldECC           = "ecc"
	FieldNVLink        = "nvlink"
)

// maxCounter bounds the driver's 64-bit counters: the top half of the
// range is where its sentinels (0xFFFFFFFFFFFFFFFF) live, and no error or
// byte counter reaches it.
const maxCounter = 1 << 63

// Drop is told the field of each reading dropped.
type Drop func(field string)

// Device drops the impossible readings of d in place, and carries the
// energy counter over a driver reset (energy holds the device's counter
// state between readings; nil: no carry).
func Device(d *snapshot.Device, energy *Counter, drop Drop) {
	temperature(&d.Temperature, drop)
	power(&d.Power, energy, drop)
	ratios(d, drop)
	memory(&d.Memory, drop)
	clocks(d, drop)
	if p, ok := d.PState.Get(); ok && (p < 0 || p > 15) {
		d.PState = snapshot.Opt[int]{}
		drop(FieldPState)
	}
	pcie(&d.PCIe, drop)
	e := &d.ECC
	counters([]*snapshot.Opt[uint64]{&e.VolatileCorrected, &e.VolatileUncorrected, &e.AggregateCorrected, &e.AggregateUncorrected,
		&e.RetiredPagesSingleBit, &e.RetiredPagesDoubleBit, &e.RemappedRowsCorrectable, &e.RemappedRowsUncorrectable}, FieldECC, drop)
	for i := range d.NVLinks {
		l := &d.NVLinks[i]
		counters([]*snapshot.Opt[uint64]{&l.TxBytes, &l.RxBytes, &l.CRCFlitErrors, &l.CRCDataErrors, &l.ReplayErrors, &l.RecoveryErrors}, FieldNVLink, drop)
	}
	for i := range d.MIGInstances {
		mi := &d.MIGInstances[i]
		usedTotal(&mi.MemoryUsed, &mi.MemoryTotal, d.Memory.Total, drop)
	}
}

// Processes drops process memory readings no GPU can hold: more than
// its device's memory (total: the device's total, absent when unknown)
// or a sentinel.
func Processes(procs []snapshot.Process, total snapshot.Opt[uint64], drop Drop) {
	for i := range procs {
		p := &procs[i]
		v, ok := p.UsedMemory.Get()
		if !ok {
			continue
		}
		if limit, known := total.Get(); (known && v > limit) || v >= 1<<63 {
			p.UsedMemory = snapshot.Opt[uint64]{}
			drop(FieldProcessMemory)
		}
		ratio(&p.SMUtilization, FieldUtilization, drop)
		ratio(&p.MemoryUtilization, FieldUtilization, drop)
	}
}

// pcie drops link generations and widths no PCIe link has (generation
// at most 7, at most 32 lanes; 0xFFFFFFFF is the driver's "unavailable") and
// sentinel counters.
func pcie(p *snapshot.PCIe, drop Drop) {
	for _, v := range []*snapshot.Opt[int]{&p.LinkGen, &p.MaxLinkGen} {
		if x, ok := v.Get(); ok && !(x >= 0 && x <= 7) {
			*v = snapshot.Opt[int]{}
			drop(FieldPCIe)
		}
	}
	for _, v := range []*snapshot.Opt[int]{&p.LinkWidth, &p.MaxLinkWidth} {
		if x, ok := v.Get(); ok && !(x >= 0 && x <= 32) {
			*v = snapshot.Opt[int]{}
			drop(FieldPCIe)
		}
	}
	counters([]*snapshot.Opt[uint64]{&p.TxBytes, &p.RxBytes, &p.ReplayCounter}, FieldPCIe, drop)
}

// counters drops 64-bit counters in the sentinels' range.
func counters(cs []*snapshot.Opt[uint64], field string, drop Drop) {
	for _, c := range cs {
		if v, ok := c.Get(); ok && v >= maxCounter {
			*c = snapshot.Opt[uint64]{}
			drop(field)
		}
	}
}

func temperature(t *snapshot.Temperature, drop Drop) {
	for _, c := range []*snapshot.Opt[float64]{&t.GPU, &t.Memory, &t.SlowdownThreshold, &t.ShutdownThreshold, &t.MemoryMaxThreshold} {
		if v, ok := c.Get(); ok && !(v > -100 && v <= MaxCelsius) {
			*c = snapshot.Opt[float64]{}
			drop(FieldTemperature)
		}
	}
}

func power(p *snapshot.Power, energy *Counter, drop Drop) {
	limit := float64(MaxWatts)
	if m, ok := p.MaxLimit.Get(); ok && m > 0 && m*PowerOverMaxLimit < MaxWatts {
		limit = m * PowerOverMaxLimit
	}
	for _, w := range []*snapshot.Opt[float64]{&p.EnforcedLimit, &p.DefaultLimit, &p.MinLimit, &p.MaxLimit} {
		if v, ok := w.Get(); ok && !(v >= 0 && v <= MaxWatts) {
			*w = snapshot.Opt[float64]{}
			drop(FieldPower)
		}
	}
	if v, ok := p.Usage.Get(); ok && !(v >= 0 && v <= limit) {
		p.Usage = snapshot.Opt[float64]{}
		drop(FieldPower)
	}
	if v, ok := p.Energy.Get(); ok {
		switch {
		case !(v >= 0 && v < MaxJoules):
			p.Energy = snapshot.Opt[float64]{}
			drop(FieldEnergy)
		case energy != nil:
			p.Energy = snapshot.Some(energy.Carry(v))
		}
	}
}

func ratios(d *snapshot.Device, drop Drop) {
	u := &d.Utilization
	for _, r := range []*snapshot.Opt[float64]{&u.GPU, &u.Memory, &u.Encoder, &u.Decoder} {
		ratio(r, FieldUtilization, drop)
	}
	ratio(&d.FanSpeed, FieldFanSpeed, drop)
	g := &d.GPM
	for _, r := range []*snapshot.Opt[float64]{&g.SMActive, &g.SMOccupancy, &g.TensorActive, &g.DRAMActive, &g.FP16Active, &g.FP32Active, &g.FP64Active, &g.GraphicsActive} {
		ratio(r, FieldUtilization, drop)
	}
}

// ratio drops a ratio outside 0-1 (NaN included).
func ratio(r *snapshot.Opt[float64], field string, drop Drop) {
	if v, ok := r.Get(); ok && !(v >= 0 && v <= 1) {
		*r = snapshot.Opt[float64]{}
		drop(field)
	}
}

func memory(m *snapshot.Memory, drop Drop) {
	total, hasTotal := m.Total.Get()
	if hasTotal && total >= 1<<63 {
		m.Total, hasTotal = snapshot.Opt[uint64]{}, false
		drop(FieldMemory)
	}
	if hasTotal {
		for _, v := range []*snapshot.Opt[uint64]{&m.Used, &m.Free, &m.Reserved} {
			if x, ok := v.Get(); ok && x > total {
				*v = snapshot.Opt[uint64]{}
				drop(FieldMemory)
			}
		}
	}
	bar1, hasBAR1 := m.BAR1Total.Get()
	if hasBAR1 {
		for _, v := range []*snapshot.Opt[uint64]{&m.BAR1Used, &m.BAR1Free} {
			if x, ok := v.Get(); ok && x > bar1 {
				*v = snapshot.Opt[uint64]{}
				drop(FieldMemory)
			}
		}
	}
}

// usedTotal drops a MIG instance's used memory above its total, and a
// total above its GPU's.
func usedTotal(used, total *snapshot.Opt[uint64], gpuTotal snapshot.Opt[uint64], drop Drop) {
	if t, ok := total.Get(); ok {
		if g, known := gpuTotal.Get(); (known && t > g) || t >= 1<<63 {
			*total = snapshot.Opt[uint64]{}
			drop(FieldMemory)
		}
	}
	if u, ok := used.Get(); ok {
		if t, known := total.Get(); (known && u > t) || u >= 1<<63 {
			*used = snapshot.Opt[uint64]{}
			drop(FieldMemory)
		}
	}
}

func clocks(d *snapshot.Device, drop Drop) {
	for i := range d.Clocks {
		c := &d.Clocks[i]
		if v, ok := c.Max.Get(); ok && !(v >= 0 && v <= MaxHertz) {
			c.Max = snapshot.Opt[float64]{}
			drop(FieldClock)
		}
		limit := float64(MaxHertz)
		if m, ok := c.Max.Get(); ok && m > 0 {
			limit = min(limit, m*ClockOverMax)
		}
		if v, ok := c.Current.Get(); ok && !(v >= 0 && v <= limit) {
			c.Current = snapshot.Opt[float64]{}
			drop(FieldClock)
		}
	}
	// A domain with neither reading left is no domain.
	d.Clocks = deleteEmptyClocks(d.Clocks)
}

func deleteEmptyClocks(cs []snapshot.Clock) []snapshot.Clock {
	out := cs[:0]
	for _, c := range cs {
		if c.Current.Valid || c.Max.Valid {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Counter is one device's driver counter carried over the driver's
// resets. The zero value is ready.
type Counter struct {
	last, offset float64
	seen         bool
}

// Carry returns the exported value for the driver's raw reading: raw plus
// what was counted before the driver's counter last started again. A raw
// value below the previous one is such a restart (a driver reload); the
// counter then goes on from the last exported value.
func (c *Counter) Carry(raw float64) float64 {
	if c.seen && raw < c.last {
		c.offset += c.last
	}
	c.last, c.seen = raw, true
	return c.offset + raw
}

// Sum adds a and b, and reports false when the sum overflows 64 bits.
func Sum(a, b uint64) (uint64, bool) {
	s := a + b
	return s, s >= a
}
