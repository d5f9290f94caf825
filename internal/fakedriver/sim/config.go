//go:build cgo

package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
)

// Config is the simulator's YAML configuration. Its schema is a public
// contract that other tools rely on: fields may be added, never renamed.
type Config struct {
	// Profile names the simulated host (see Profiles).
	Profile string `yaml:"profile"`
	// Processes, when the key is present, replaces the profile's default
	// GPU processes (an empty list means no processes at all).
	Processes []ProcessSpec `yaml:"processes"`
	// Faults are injected failures.
	Faults []Fault `yaml:"faults"`
	// PinTime, when set, freezes the simulated elapsed time: every reading,
	// counter and fault is evaluated at this instant. Used by golden tests.
	PinTime *Duration `yaml:"pin_time"`
	// WallClock starts an unpinned simulated clock at the real time (the
	// demo), not at Epoch: every time it reports is today's. Not in the
	// YAML: a config file describes a host, gpuwatch decides its clock.
	WallClock bool `yaml:"-"`
	// Driver, when set, names the NVIDIA driver branch the simulated
	// library is ("R535"; see nvmlbranch): it exports only that branch's
	// functions and knows only its field IDs. Empty: every function.
	Driver string `yaml:"driver"`
	// Seed makes this simulated host's GPU UUIDs and serials its own, so
	// that two simulated hosts with one profile do not share UUIDs (every
	// PromQL join on uuid would mix them). gpuwatch sets it to the host
	// name unless told otherwise; empty keeps the profile's own UUIDs.
	Seed string `yaml:"seed"`
	// Privileged makes the simulated caller privileged as nvml.h means it
	// (root with CAP_SYS_ADMIN, or holding the MIG monitor capability): a
	// MIG-enabled GPU's own process lists and its GPU instances
	// (GetGpuInstances, GetGpuInstanceById) answer. Unprivileged (the
	// default, like an exporter in a container without capabilities) they
	// answer NO_PERMISSION.
	Privileged bool `yaml:"privileged"`
	// ProcessesFrom names a file of GPU processes that come and go at run
	// time (processes_from.go): re-read whenever it changes, its entries
	// reported while their PID runs. A relative path is relative to the
	// config file.
	ProcessesFrom string `yaml:"processes_from"`
	// InitError makes nvmlInit fail with this NVML error (see
	// InitErrorNames), as a driver in trouble does: e.g.
	// "lib_rm_version_mismatch" after a driver upgrade whose kernel
	// module was not reloaded.
	InitError string `yaml:"init_error"`
	// DriverVersion replaces the version string the driver reports, to
	// test what gpuwatch makes of a hostile one (control characters,
	// newlines).
	DriverVersion *string `yaml:"driver_version"`
	// ProcessSamples is how GetProcessUtilization answers (see
	// processes.go): "per_process" (the default) one sample per process,
	// its utilization since lastSeenTimestamp, as drivers are seen to do;
	// "every_period" every buffered 1/6 s sample, several per process,
	// which nvml.h's words also admit.
	ProcessSamples string `yaml:"process_samples"`

	// source is the file (or name) the config was parsed from, for errors.
	source string
	// processesSet records that the `processes` key was present, so that
	// `processes: []` clears the profile defaults.
	processesSet bool
}

// ProcessSpec is one GPU process the simulated driver reports.
type ProcessSpec struct {
	GPU             int    `yaml:"gpu"`
	PID             uint32 `yaml:"pid"`
	UsedMemoryBytes uint64 `yaml:"used_memory_bytes"`
	// SMUtilization and MemoryUtilization are ratios 0–1 (NVML reports
	// them as percent from GetProcessUtilization).
	SMUtilization     float64 `yaml:"sm_utilization"`
	MemoryUtilization float64 `yaml:"memory_utilization"`
	// GPUInstance and ComputeInstance place the process in a MIG instance;
	// required (gpu_instance) on a MIG-enabled GPU, refused elsewhere.
	GPUInstance     *int `yaml:"gpu_instance"`
	ComputeInstance *int `yaml:"compute_instance"`
	// Type is "compute" (default), "graphics", or "compute+graphics" for a
	// process holding both contexts (NVML then lists it in both process
	// lists, each time with all of its memory).
	// "mps" is a client of an MPS server, listed only by
	// GetMPSComputeRunningProcesses; "compute+mps" one listed by both.
	Type string `yaml:"type"`
	// Start and End bound the process's life in simulated elapsed time:
	// the driver lists it (and samples its utilization) from Start
	// (default 0) until End (default: for ever), so accounting has
	// processes that begin and end at known times.
	Start *Duration `yaml:"start"`
	End   *Duration `yaml:"end"`
	// Schedule changes the process's utilization over time: from each
	// step's At on, its values apply until the next step. Before the
	// first step, sm_utilization and memory_utilization apply. Only what
	// the driver reports per process follows it (its utilization
	// samples); the device's own readings (utilization, power, energy,
	// GPM) follow the processes' sm_utilization as before.
	Schedule []UtilizationStep `yaml:"schedule"`

	line int // line in the config file, 0 for profile defaults
}

// UtilizationStep is one change of a simulated process's utilization.
type UtilizationStep struct {
	At                Duration `yaml:"at"`
	SMUtilization     float64  `yaml:"sm_utilization"`
	MemoryUtilization float64  `yaml:"memory_utilization"`
}

// Fault is one injected failure on one GPU. An entry may combine kinds.
type Fault struct {
	GPU int `yaml:"gpu"`
	// LostAfter: from this elapsed time on, every call on the device
	// returns ERROR_GPU_IS_LOST.
	LostAfter *Duration `yaml:"lost_after"`
	// Unsupported names reads that return ERROR_NOT_SUPPORTED (see
	// UnsupportedNames).
	Unsupported []string `yaml:"unsupported"`
	// XID is raised once as an EventTypeXidCriticalError event at elapsed
	// time At (0 when At is absent).
	XID uint64    `yaml:"xid"`
	At  *Duration `yaml:"at"`
	// HangAfter: from this elapsed time on, every call on the device
	// blocks, like an NVML call stuck on a GPU in a bad state, until
	// HangFor has passed (forever when HangFor is absent).
	HangAfter *Duration `yaml:"hang_after"`
	HangFor   *Duration `yaml:"hang_for"`
	// MIGModePending: the GPU's MIG mode was changed (nvidia-smi -mig) and
	// waits for a GPU reset, so GetMigMode reports a pending mode other
	// than the current one. Needs a MIG-capable GPU.
	MIGModePending bool `yaml:"mig_mode_pending"`
	// FabricDegraded: the GPU's NVSwitch fabric reports degraded
	// bandwidth and limited capacity (nvmlDeviceGetGpuFabricInfoV's
	// health mask and summary). Needs an NVSwitch-connected Hopper GPU.
	FabricDegraded bool `yaml:"fabric_degraded"`
	// LostHandle: once the GPU is lost (LostAfter), DeviceGetHandleByIndex
	// answers ERROR_GPU_IS_LOST too, as nvml.h documents for
	// nvmlDeviceGetHandleByIndex_v2, so no handle is there to ask.
	LostHandle bool `yaml:"lost_handle"`
	// ProcessListSize makes the GPU's process lists answer
	// ERROR_INSUFFICIENT_SIZE to every buffer offered, asking for twice
	// the entries offered ("doubling") or for one more ("one_more", a
	// list that changes under the caller), as a driver in trouble does.
	ProcessListSize string `yaml:"process_list_size"`
	// RetiredPagesSize makes the GPU's retired-page lists
	// (nvmlDeviceGetRetiredPages and _v2) answer ERROR_INSUFFICIENT_SIZE
	// to every buffer offered, the count query included, asking for twice
	// the entries offered ("doubling") or for one more ("one_more"): a
	// sick driver whose count keeps growing. Needs a GPU with page
	// retirement (before Ampere: the v100 profile).
	RetiredPagesSize string `yaml:"retired_pages_size"`
	// SlowCalls: every call on the device takes this long before it
	// answers, as on a driver without persistence mode on a busy host
	// (bench/RESULTS.md has what a call took there).
	SlowCalls *Duration `yaml:"slow_calls"`
	// BogusValues names readings that answer values no GPU can have: the
	// driver's "unavailable" sentinels and impossible readings (see
	// BogusValueNames).
	BogusValues []string `yaml:"bogus_values"`
	// EnergyResetAt: the driver's energy counter starts again from 0 at
	// this elapsed time, as after a driver reload.
	EnergyResetAt *Duration `yaml:"energy_reset_at"`
	// ECCUncorrectable adds this many uncorrectable (double-bit) ECC
	// errors at elapsed time At: the volatile count (since the last GPU
	// reset) and the aggregate count (the GPU's life) both rise.
	ECCUncorrectable uint64 `yaml:"ecc_uncorrectable"`
	// RowRemap marks a memory row at elapsed time At: "pending" (the
	// remap waits for a GPU reset, which applies it) or "failure" (no
	// spare row was left; it stays until the GPU is replaced). Needs a GPU
	// that remaps rows (Ampere and later).
	RowRemap string `yaml:"row_remap"`
	// ResetAt: a GPU reset (nvidia-smi -r) at this elapsed time: the
	// volatile ECC counts start again from 0 and pending row remaps are
	// applied. A remap failure and the aggregate counts stay.
	ResetAt *Duration `yaml:"reset_at"`

	line int
}

// The values of Fault.ProcessListSize.
const (
	ProcessListDoubling = "doubling"
	ProcessListOneMore  = "one_more"
)

// The values of Fault.RowRemap.
const (
	RowRemapPending = "pending"
	RowRemapFailure = "failure"
)

// The values of Fault.RetiredPagesSize: the same as ProcessListSize's.
const (
	RetiredPagesDoubling = ProcessListDoubling
	RetiredPagesOneMore  = ProcessListOneMore
)

// Duration is a time.Duration written in YAML as a Go duration string
// ("30s", "1m30s", "2h").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML parses a duration string; negative durations are refused.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a duration like \"30s\"", n.Line)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: invalid duration %q (use a Go duration like \"30s\", \"5m\", \"1h30m\")", n.Line, n.Value)
	}
	if v < 0 {
		return fmt.Errorf("line %d: duration %q is negative", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// LoadConfig reads and parses a YAML config file.
func LoadConfig(path string) (Config, error) {
	data, err := configfile.Read(path)
	if err != nil {
		return Config{}, fmt.Errorf("sim config: %w", err)
	}
	cfg, err := ParseConfig(data, path)
	if err == nil && cfg.ProcessesFrom != "" && !filepath.IsAbs(cfg.ProcessesFrom) {
		cfg.ProcessesFrom = filepath.Join(filepath.Dir(path), cfg.ProcessesFrom)
	}
	return cfg, err
}

// ParseConfig parses YAML config data. name (usually the file path) prefixes
// every error. Unknown keys are errors naming the line. Checks that need the
// profile (GPU indexes, MIG instances) are done by New.
func ParseConfig(data []byte, name string) (Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%s: %s", name, yamlErrorText(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%s: only one YAML document is allowed", name)
	}
	cfg.source = name
	// A second pass over the node tree recovers line numbers, so that
	// New can point at the offending list entry.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err == nil && len(root.Content) == 1 {
		recordLines(root.Content[0], &cfg)
	}
	if err := cfg.validateShape(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// recordLines stores each list entry's line and whether `processes` was given.
func recordLines(doc *yaml.Node, cfg *Config) {
	if doc.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		key, val := doc.Content[i], doc.Content[i+1]
		switch key.Value {
		case "processes":
			cfg.processesSet = true
			for j, item := range val.Content {
				if j < len(cfg.Processes) {
					cfg.Processes[j].line = item.Line
				}
			}
		case "faults":
			for j, item := range val.Content {
				if j < len(cfg.Faults) {
					cfg.Faults[j].line = item.Line
				}
			}
		}
	}
}

// yamlErrorText is yaml.v3's error on one line, in the file's terms,
// an unknown key named with the valid ones.
func yamlErrorText(err error) string {
	return configfile.YAMLError(err, keysOfType)
}

// keysOfType lists the YAML keys of the config type named by yaml.v3
// (e.g. "sim.Fault").
func keysOfType(typeName string) []string {
	var t reflect.Type
	switch strings.TrimPrefix(typeName, "sim.") {
	case "Config":
		t = reflect.TypeFor[Config]()
	case "ProcessSpec":
		t = reflect.TypeFor[ProcessSpec]()
	case "Fault":
		t = reflect.TypeFor[Fault]()
	default:
		return nil
	}
	var keys []string
	for field := range t.Fields() {
		if tag, _, _ := strings.Cut(field.Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			keys = append(keys, tag)
		}
	}
	return keys
}

// where names a list entry in errors: "file.yaml line 7 (faults[2])".
func (c *Config) where(list string, i, line int) string {
	src := c.source
	if src == "" {
		src = "sim config"
	}
	if line > 0 {
		return fmt.Sprintf("%s line %d (%s[%d])", src, line, list, i)
	}
	return fmt.Sprintf("%s (%s[%d])", src, list, i)
}

// validateShape checks what does not depend on the profile.
func (c *Config) validateShape() error {
	if c.Driver != "" {
		if _, ok := nvmlbranch.Lookup(c.Driver); !ok {
			src := c.source
			if src == "" {
				src = "sim config"
			}
			return fmt.Errorf("%s: driver %q is not a known driver branch (one of %s)",
				src, c.Driver, strings.Join(nvmlbranch.Names(), ", "))
		}
	}
	if c.InitError != "" {
		if _, ok := initErrors[c.InitError]; !ok {
			return fmt.Errorf("%s: init_error %q is not one of %s", c.sourceName(), c.InitError, strings.Join(InitErrorNames(), ", "))
		}
	}
	if c.ProcessSamples != "" && c.ProcessSamples != ProcessSamplesPerProcess && c.ProcessSamples != ProcessSamplesEveryPeriod {
		return fmt.Errorf("%s: process_samples %q is not one of %s, %s", c.sourceName(), c.ProcessSamples, ProcessSamplesPerProcess, ProcessSamplesEveryPeriod)
	}
	for i, p := range c.Processes {
		if err := p.validate(); err != nil {
			return fmt.Errorf("%s: %w", c.where("processes", i, p.line), err)
		}
	}
	for i, f := range c.Faults {
		if err := f.validate(); err != nil {
			return fmt.Errorf("%s: %w", c.where("faults", i, f.line), err)
		}
	}
	return nil
}

// validate checks one process entry on its own (its GPU and MIG instance
// are checked against the profile when it is placed).
func (p *ProcessSpec) validate() error {
	if p.PID == 0 {
		return errors.New("pid must be set and non-zero")
	}
	if p.GPU < 0 {
		return fmt.Errorf("gpu %d is negative", p.GPU)
	}
	if !(p.SMUtilization >= 0 && p.SMUtilization <= 1) { // NaN fails both
		return fmt.Errorf("sm_utilization %g is not a ratio between 0 and 1", p.SMUtilization)
	}
	if !(p.MemoryUtilization >= 0 && p.MemoryUtilization <= 1) {
		return fmt.Errorf("memory_utilization %g is not a ratio between 0 and 1", p.MemoryUtilization)
	}
	switch p.Type {
	case "", "compute", "graphics", "compute+graphics", "mps", "compute+mps":
	default:
		return fmt.Errorf("type %q is not \"compute\", \"graphics\", \"compute+graphics\", \"mps\" or \"compute+mps\"", p.Type)
	}
	if p.ComputeInstance != nil && p.GPUInstance == nil {
		return errors.New("compute_instance needs gpu_instance")
	}
	return p.validateLife()
}

// namesAFault says whether the entry asks for any fault at all.
func (f *Fault) namesAFault() bool {
	return f.LostAfter != nil || len(f.Unsupported) > 0 || f.XID != 0 || f.HangAfter != nil || f.MIGModePending ||
		f.FabricDegraded || f.LostHandle || f.ProcessListSize != "" || f.RetiredPagesSize != "" || f.sick() ||
		f.ECCUncorrectable != 0 || f.RowRemap != "" || f.ResetAt != nil
}

// validate checks one fault entry on its own: it names a fault, and the
// keys that need another key have it.
func (f *Fault) validate() error {
	if f.GPU < 0 {
		return fmt.Errorf("gpu %d is negative", f.GPU)
	}
	if !f.namesAFault() {
		if f.At != nil {
			return errors.New("'at' needs an 'xid', 'ecc_uncorrectable' or 'row_remap'")
		}
		if f.HangFor != nil {
			return errors.New("'hang_for' needs a 'hang_after'")
		}
		return fmt.Errorf("a fault needs lost_after, unsupported, xid, hang_after, mig_mode_pending, fabric_degraded, process_list_size, retired_pages_size, ecc_uncorrectable, row_remap, reset_at, %s", sickKeys)
	}
	if f.LostHandle && f.LostAfter == nil {
		return errors.New("'lost_handle' needs a 'lost_after'")
	}
	for _, size := range []struct{ key, value string }{{"process_list_size", f.ProcessListSize}, {"retired_pages_size", f.RetiredPagesSize}} {
		switch size.value {
		case "", ProcessListDoubling, ProcessListOneMore:
		default:
			return fmt.Errorf("%s %q is not %q or %q", size.key, size.value, ProcessListDoubling, ProcessListOneMore)
		}
	}
	if f.HangFor != nil && f.HangAfter == nil {
		return errors.New("'hang_for' needs a 'hang_after'")
	}
	if f.At != nil && f.XID == 0 && f.ECCUncorrectable == 0 && f.RowRemap == "" {
		return errors.New("'at' needs a non-zero 'xid', a non-zero 'ecc_uncorrectable' or a 'row_remap'")
	}
	switch f.RowRemap {
	case "", RowRemapPending, RowRemapFailure:
	default:
		return fmt.Errorf("row_remap %q is not %q or %q", f.RowRemap, RowRemapPending, RowRemapFailure)
	}
	for _, name := range f.Unsupported {
		if _, err := featureByName(name); err != nil {
			return err
		}
	}
	return f.checkSick()
}

// validateLife checks a process's start, end and utilization schedule.
func (p *ProcessSpec) validateLife() error {
	if p.Start != nil && p.End != nil && p.End.D() <= p.Start.D() {
		return fmt.Errorf("end %s is not after start %s", p.End, p.Start)
	}
	for j, st := range p.Schedule {
		if !(st.SMUtilization >= 0 && st.SMUtilization <= 1) {
			return fmt.Errorf("schedule[%d]: sm_utilization %g is not a ratio between 0 and 1", j, st.SMUtilization)
		}
		if !(st.MemoryUtilization >= 0 && st.MemoryUtilization <= 1) {
			return fmt.Errorf("schedule[%d]: memory_utilization %g is not a ratio between 0 and 1", j, st.MemoryUtilization)
		}
		if j > 0 && st.At.D() <= p.Schedule[j-1].At.D() {
			return fmt.Errorf("schedule[%d]: at %s is not after the previous step's %s", j, st.At, p.Schedule[j-1].At)
		}
	}
	return nil
}
