package smibackend

import (
	"fmt"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// field is one --query-gpu property and where its value goes.
type field struct {
	// names are the property's names, the current one first, then those
	// older drivers know it by; the first the driver lists is asked for.
	names []string
	group string
	// set stores a present value; an error (errGarbage) leaves it absent.
	set func(r *row, v string) error
}

// row is one GPU's line of --query-gpu output being parsed.
type row struct {
	d *snapshot.Device
	// driver is the driver version the row reports (host-wide).
	driver string
	// migCurrent and migPending are the MIG modes, compared once the row
	// is read: a pending mode unlike the current one waits for a reset.
	migCurrent, migPending string
}

// finish derives what takes more than one property: a pending MIG mode
// unlike the current one waits for a reset.
func (r *row) finish() {
	if r.migPending != "" && r.migCurrent != "" && r.d.Up {
		r.d.MIGModePending = snapshot.Some(r.migPending != r.migCurrent)
	}
}

// The index and UUID come first: a row is a GPU by them.
var (
	fieldIndex = field{[]string{"index"}, snapshot.GroupInfo, func(r *row, v string) error {
		n, err := whole(v)
		r.d.Index = int(n)
		return err
	}}
	fieldUUID = field{[]string{"uuid"}, snapshot.GroupInfo, func(r *row, v string) error {
		r.d.UUID = strings.TrimSpace(v)
		return nil
	}}
)

// gpuFields are the properties read, in the order they are asked for.
// The names and units are those of `nvidia-smi --help-query-gpu`; with
// --format=csv,nounits memory is in MiB, clocks in MHz, power in W,
// temperatures in °C and utilization and fan speed in percent.
var gpuFields = []field{
	fieldIndex,
	fieldUUID,
	{[]string{"driver_version"}, snapshot.GroupInfo, func(r *row, v string) error { r.driver = strings.TrimSpace(v); return nil }},
	text([]string{"name", "gpu_name"}, func(d *snapshot.Device) *string { return &d.Info.Name }),
	text([]string{"pci.bus_id", "gpu_bus_id"}, func(d *snapshot.Device) *string { return &d.Info.PCIBusID }),
	text([]string{"serial", "gpu_serial"}, func(d *snapshot.Device) *string { return &d.Info.Serial }),
	text([]string{"vbios_version"}, func(d *snapshot.Device) *string { return &d.Info.VBIOSVersion }),
	text([]string{"compute_cap"}, func(d *snapshot.Device) *string { return &d.Info.ComputeCapability }),
	mode([]string{"persistence_mode"}, func(d *snapshot.Device) *string { return &d.Info.PersistenceMode }),
	mode([]string{"compute_mode"}, func(d *snapshot.Device) *string { return &d.Info.ComputeMode }),
	mode([]string{"ecc.mode.current"}, func(d *snapshot.Device) *string { return &d.Info.ECCMode }),
	{[]string{"mig.mode.current"}, snapshot.GroupInfo, func(r *row, v string) error {
		r.migCurrent = lowerMode(v)
		r.d.Info.MIGMode = r.migCurrent
		return nil
	}},
	{[]string{"mig.mode.pending"}, snapshot.GroupMIG, func(r *row, v string) error { r.migPending = lowerMode(v); return nil }},

	percent(snapshot.GroupUtilization, "utilization.gpu", func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Utilization.GPU }),
	percent(snapshot.GroupUtilization, "utilization.memory", func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Utilization.Memory }),
	percent(snapshot.GroupUtilization, "utilization.encoder", func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Utilization.Encoder }),
	percent(snapshot.GroupUtilization, "utilization.decoder", func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Utilization.Decoder }),

	mib("memory.total", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.Memory.Total }),
	mib("memory.used", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.Memory.Used }),
	mib("memory.free", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.Memory.Free }),
	mib("memory.reserved", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.Memory.Reserved }),

	decimal(snapshot.GroupTemperature, []string{"temperature.gpu"}, 1, func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Temperature.GPU }),
	decimal(snapshot.GroupTemperature, []string{"temperature.memory"}, 1, func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Temperature.Memory }),
	percent(snapshot.GroupFan, "fan.speed", func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.FanSpeed }),

	clock("graphics", false, "clocks.current.graphics", "clocks.gr"),
	clock("sm", false, "clocks.current.sm", "clocks.sm"),
	clock("memory", false, "clocks.current.memory", "clocks.mem"),
	clock("video", false, "clocks.current.video", "clocks.video"),
	clock("graphics", true, "clocks.max.graphics", "clocks.max.gr"),
	clock("sm", true, "clocks.max.sm"),
	clock("memory", true, "clocks.max.memory", "clocks.max.mem"),
	{[]string{"pstate"}, snapshot.GroupClocks, func(r *row, v string) error {
		n, err := whole(strings.TrimPrefix(strings.TrimSpace(v), "P"))
		if err != nil || n > 15 {
			return fmt.Errorf("%q %w as a performance state", v, errGarbage)
		}
		r.d.PState = snapshot.Some(int(n))
		return nil
	}},
	event("gpu_idle"),
	event("applications_clocks_setting"),
	event("sw_power_cap"),
	event("hw_slowdown"),
	event("sync_boost"),
	event("sw_thermal_slowdown"),
	event("hw_thermal_slowdown"),
	event("hw_power_brake_slowdown"),

	decimal(snapshot.GroupPower, []string{"power.draw"}, 1, func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Power.Usage }),
	decimal(snapshot.GroupPower, []string{"enforced.power.limit", "power.limit"}, 1, func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Power.EnforcedLimit }),
	decimal(snapshot.GroupPower, []string{"power.default_limit"}, 1, func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Power.DefaultLimit }),
	decimal(snapshot.GroupPower, []string{"power.min_limit"}, 1, func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Power.MinLimit }),
	decimal(snapshot.GroupPower, []string{"power.max_limit"}, 1, func(d *snapshot.Device) *snapshot.Opt[float64] { return &d.Power.MaxLimit }),

	small(snapshot.GroupPCIe, "pcie.link.gen.current", func(d *snapshot.Device) *snapshot.Opt[int] { return &d.PCIe.LinkGen }),
	small(snapshot.GroupPCIe, "pcie.link.gen.max", func(d *snapshot.Device) *snapshot.Opt[int] { return &d.PCIe.MaxLinkGen }),
	small(snapshot.GroupPCIe, "pcie.link.width.current", func(d *snapshot.Device) *snapshot.Opt[int] { return &d.PCIe.LinkWidth }),
	small(snapshot.GroupPCIe, "pcie.link.width.max", func(d *snapshot.Device) *snapshot.Opt[int] { return &d.PCIe.MaxLinkWidth }),

	count("ecc.errors.corrected.volatile.total", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.ECC.VolatileCorrected }),
	count("ecc.errors.uncorrected.volatile.total", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.ECC.VolatileUncorrected }),
	count("ecc.errors.corrected.aggregate.total", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.ECC.AggregateCorrected }),
	count("ecc.errors.uncorrected.aggregate.total", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.ECC.AggregateUncorrected }),
	count("retired_pages.single_bit_ecc.count", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.ECC.RetiredPagesSingleBit }, "retired_pages.sbe"),
	count("retired_pages.double_bit.count", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.ECC.RetiredPagesDoubleBit }, "retired_pages.dbe"),
	yesNo("retired_pages.pending", func(d *snapshot.Device) *snapshot.Opt[bool] { return &d.ECC.RetiredPagesPending }),
	count("remapped_rows.correctable", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.ECC.RemappedRowsCorrectable }),
	count("remapped_rows.uncorrectable", func(d *snapshot.Device) *snapshot.Opt[uint64] { return &d.ECC.RemappedRowsUncorrectable }),
	yesNo("remapped_rows.pending", func(d *snapshot.Device) *snapshot.Opt[bool] { return &d.ECC.RemappedRowsPending }),
	yesNo("remapped_rows.failure", func(d *snapshot.Device) *snapshot.Opt[bool] { return &d.ECC.RemappedRowsFailure }),
}

func text(names []string, at func(*snapshot.Device) *string) field {
	return field{names, snapshot.GroupInfo, func(r *row, v string) error {
		*at(r.d) = strings.TrimSpace(v)
		return nil
	}}
}

// lowerMode turns nvidia-smi's "Enabled", "Exclusive_Process" into the
// snapshot's "enabled", "exclusive_process".
func lowerMode(v string) string { return strings.ToLower(strings.TrimSpace(v)) }

func mode(names []string, at func(*snapshot.Device) *string) field {
	return field{names, snapshot.GroupInfo, func(r *row, v string) error {
		*at(r.d) = lowerMode(v)
		return nil
	}}
}

// real is a decimal reading times scale.
func decimal(group string, names []string, scale float64, at func(*snapshot.Device) *snapshot.Opt[float64]) field {
	return field{names, group, func(r *row, v string) error {
		x, err := number(v)
		if err == nil {
			*at(r.d) = snapshot.Some(x * scale)
		}
		return err
	}}
}

// percent is a percentage, stored as a ratio 0-1.
func percent(group, name string, at func(*snapshot.Device) *snapshot.Opt[float64]) field {
	return field{[]string{name}, group, func(r *row, v string) error {
		x, err := number(v)
		if err == nil {
			*at(r.d) = snapshot.Some(x / 100)
		}
		return err
	}}
}

// mib is a memory size in MiB, stored in bytes.
func mib(name string, at func(*snapshot.Device) *snapshot.Opt[uint64]) field {
	return field{[]string{name}, snapshot.GroupMemory, func(r *row, v string) error {
		n, err := whole(v)
		if err == nil {
			*at(r.d) = snapshot.Some(n << 20)
		}
		return err
	}}
}

func count(name string, at func(*snapshot.Device) *snapshot.Opt[uint64], older ...string) field {
	return field{append([]string{name}, older...), snapshot.GroupECC, func(r *row, v string) error {
		n, err := whole(v)
		if err == nil {
			*at(r.d) = snapshot.Some(n)
		}
		return err
	}}
}

func small(group, name string, at func(*snapshot.Device) *snapshot.Opt[int]) field {
	return field{[]string{name}, group, func(r *row, v string) error {
		n, err := whole(v)
		if err != nil || n > 1<<16 {
			return fmt.Errorf("%q %w as a small whole number", v, errGarbage)
		}
		*at(r.d) = snapshot.Some(int(n))
		return nil
	}}
}

func yesNo(name string, at func(*snapshot.Device) *snapshot.Opt[bool]) field {
	return field{[]string{name}, snapshot.GroupECC, func(r *row, v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "yes":
			*at(r.d) = snapshot.Some(true)
		case "no":
			*at(r.d) = snapshot.Some(false)
		default:
			return fmt.Errorf("%q %w as Yes or No", v, errGarbage)
		}
		return nil
	}}
}

// clock is a clock domain's current or maximum clock in MHz.
func clock(domain string, isMax bool, names ...string) field {
	return field{names, snapshot.GroupClocks, func(r *row, v string) error {
		x, err := number(v)
		if err != nil {
			return err
		}
		c := clockOf(r.d, domain)
		if isMax {
			c.Max = snapshot.Some(x * 1e6)
		} else {
			c.Current = snapshot.Some(x * 1e6)
		}
		return nil
	}}
}

func clockOf(d *snapshot.Device, domain string) *snapshot.Clock {
	for i := range d.Clocks {
		if d.Clocks[i].Type == domain {
			return &d.Clocks[i]
		}
	}
	d.Clocks = append(d.Clocks, snapshot.Clock{Type: domain})
	return &d.Clocks[len(d.Clocks)-1]
}

// event is one clock-event reason, named as the NVML backend names it.
// Drivers before R535 call them clocks_throttle_reasons.
func event(reason string) field {
	return field{[]string{"clocks_event_reasons." + reason, "clocks_throttle_reasons." + reason}, snapshot.GroupClockEvents, func(r *row, v string) error {
		var active bool
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "active":
			active = true
		case "not active":
		default:
			return fmt.Errorf("%q %w as Active or Not Active", v, errGarbage)
		}
		r.d.ClockEvents = append(r.d.ClockEvents, snapshot.ClockEvent{Reason: reason, Active: active})
		return nil
	}}
}
