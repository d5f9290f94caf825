package health

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// Level is what a check's condition does to a GPU's verdict.
type Level int

// Levels, from mildest.
const (
	LevelOff Level = iota
	LevelWarn
	LevelFail
)

func (l Level) String() string {
	switch l {
	case LevelWarn:
		return "warn"
	case LevelFail:
		return "fail"
	default:
		return "off"
	}
}

func parseLevel(s string) (Level, error) {
	switch s {
	case "off":
		return LevelOff, nil
	case "warn":
		return LevelWarn, nil
	case "fail":
		return LevelFail, nil
	}
	return 0, fmt.Errorf("%q is not a level (off, warn or fail)", s)
}

// The checks, by the name the policy file, the verdicts and the
// gpu_health_check_failing metric use.
const (
	CheckGPULost             = "gpu_lost"
	CheckResponding          = "responding"
	CheckXID                 = "xid"
	CheckECCUncorrectable    = "ecc_uncorrectable"
	CheckRowRemapFailure     = "row_remap_failure"
	CheckRowRemapPending     = "row_remap_pending"
	CheckRetiredPagesPending = "retired_pages_pending"
	CheckNVLinkDown          = "nvlink_down"
	CheckHWSlowdown          = "hw_slowdown"
	CheckGPUCount            = "gpu_count"
)

// CheckInfo documents one check: what it looks at, what clears it, and
// its default level.
type CheckInfo struct {
	Name    string
	Default Level
	// Condition is what makes the check fire.
	Condition string
	// Clears is what ends the condition.
	Clears string
	// Source is where the default comes from.
	Source string
}

// Checks lists every check in the order verdicts list them. The
// responding check is not configurable: a GPU that does not answer is
// unknown, and only its staying silent past the unresponsive window fails it.
var Checks = []CheckInfo{
	{CheckGPULost, LevelFail, "the driver reports the GPU lost (GPU_IS_LOST, GPU_NOT_FOUND, RESET_REQUIRED)",
		"the GPU answers again (after a GPU reset or a reboot)", "NVML: nvmlDeviceGetHandleByIndex and reads on a lost GPU"},
	{CheckResponding, LevelFail, "the GPU did not answer within the collection's bounds: unknown; still silent after the unresponsive window: fail",
		"the GPU answers again", "gpuwatch: a hung NVML call is not a verdict"},
	{CheckXID, LevelFail, "an XID event the policy counts (hardware and driver XIDs fail, application XIDs never do, unknown codes warn)",
		"a GPU reset (gpuwatch sees the GPU drop out and answer again) or a reboot", "NVIDIA XID catalog (testdata/xid-catalog.tsv)"},
	{CheckECCUncorrectable, LevelFail, "volatile uncorrectable ECC errors since the driver loaded",
		"the volatile counter starts again: a GPU reset or a driver reload", "NVML volatile ECC counters; NVIDIA GPU memory error management"},
	{CheckRowRemapFailure, LevelFail, "a row remapping failed (the memory's spare rows are used up)",
		"the GPU is replaced: NVIDIA's RMA criterion", "NVML nvmlDeviceGetRemappedRows; NVIDIA GPU memory error management"},
	{CheckRowRemapPending, LevelFail, "a row remap waits for a GPU reset to take effect",
		"a GPU reset or a reboot applies the remap", "NVML nvmlDeviceGetRemappedRows"},
	{CheckRetiredPagesPending, LevelFail, "a retired page waits for a driver reload to take effect (GPUs before Ampere)",
		"a GPU reset or a driver reload", "NVIDIA dynamic page retirement"},
	{CheckNVLinkDown, LevelFail, "an NVLink seen active since gpuwatch started is no longer active",
		"the link is active again", "NVML nvmlDeviceGetNvLinkState"},
	{CheckHWSlowdown, LevelWarn, "a hardware slowdown (hw_slowdown, hw_thermal_slowdown or hw_power_brake_slowdown) active for the whole slowdown window",
		"a reading without the slowdown", "NVML clock event reasons"},
	{CheckGPUCount, LevelFail, "fewer GPUs than expected (--health.expect-gpus, expect_gpus, or the count at the first collection)",
		"the count is back", "gpuwatch"},
}

// Policy is a validated health policy.
type Policy struct {
	levels map[string]Level
	// xid overrides the catalog's level per code.
	xid map[uint64]Level
	// SlowdownWindow is how long a hardware slowdown must last to count.
	SlowdownWindow time.Duration
	// UnresponsiveWindow is how long a GPU may not answer before it fails.
	UnresponsiveWindow time.Duration
	// ExpectGPUs is how many GPUs the node must have; 0: as many as the
	// first collection found.
	ExpectGPUs int
}

// Default windows.
const (
	DefaultSlowdownWindow     = 5 * time.Minute
	DefaultUnresponsiveWindow = 5 * time.Minute
	maxWindow                 = 7 * 24 * time.Hour
)

// DefaultPolicy is the policy without a file.
func DefaultPolicy() Policy {
	p := Policy{levels: map[string]Level{}, xid: map[uint64]Level{},
		SlowdownWindow: DefaultSlowdownWindow, UnresponsiveWindow: DefaultUnresponsiveWindow}
	for _, c := range Checks {
		p.levels[c.Name] = c.Default
	}
	return p
}

// Level is the level of the named check.
func (p Policy) Level(check string) Level { return p.levels[check] }

// XIDLevel is what one XID of code does to a GPU: the file's override, else
// the catalog's class (warn for codes it does not list), capped by the xid
// check's own level.
func (p Policy) XIDLevel(code uint64) Level {
	l, ok := p.xid[code]
	if !ok {
		l = LevelWarn
		if e, known := xidCatalog[code]; known {
			l = e.level
		}
	}
	return min(l, p.levels[CheckXID])
}

// policyFile is the YAML policy file's shape.
type policyFile struct {
	// Checks sets a check's level: off, warn or fail.
	Checks yaml.Node `yaml:"checks"`
	XID    struct {
		Fail   []uint64 `yaml:"fail"`
		Warn   []uint64 `yaml:"warn"`
		Ignore []uint64 `yaml:"ignore"`
	} `yaml:"xid"`
	SlowdownWindow     string `yaml:"hw_slowdown_window"`
	UnresponsiveWindow string `yaml:"unresponsive_window"`
	ExpectGPUs         *int   `yaml:"expect_gpus"`
}

// LoadPolicy reads and validates the policy file at path (--health.policy).
// Every error names the file and the field.
func LoadPolicy(path string) (Policy, error) {
	data, err := configfile.Read(path)
	if err != nil {
		return Policy{}, err
	}
	return ParsePolicy(data, path)
}

// ParsePolicy validates policy data; name prefixes every error.
func ParsePolicy(data []byte, name string) (Policy, error) {
	var f policyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Policy{}, fmt.Errorf("%s: %s", name, yamlErrorText(err))
	}
	p := DefaultPolicy()
	steps := []func(*policyFile, *Policy) error{parseChecks, parseXIDs, parseWindows, parseExpect}
	for _, step := range steps {
		if err := step(&f, &p); err != nil {
			return Policy{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return p, nil
}

// policyKeys are the keys of a health policy file, named in an error
// about an unknown one.
var policyKeys = []string{"checks", "xid with fail, warn and ignore", "hw_slowdown_window", "unresponsive_window", "expect_gpus"}

// yamlErrorText is yaml.v3's error on one line, in the file's terms.
func yamlErrorText(err error) string {
	return configfile.YAMLError(err, func(string) []string { return policyKeys })
}

func parseChecks(f *policyFile, p *Policy) error {
	if f.Checks.Kind == 0 {
		return nil
	}
	if f.Checks.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: checks: expected a map of check name to off, warn or fail", f.Checks.Line)
	}
	for i := 0; i+1 < len(f.Checks.Content); i += 2 {
		key, val := f.Checks.Content[i], f.Checks.Content[i+1]
		if !slices.ContainsFunc(Checks, func(c CheckInfo) bool { return c.Name == key.Value }) || key.Value == CheckResponding {
			return fmt.Errorf("line %d: checks.%s: no such check (checks: %s)", key.Line, key.Value, configurableChecks())
		}
		l, err := parseLevel(val.Value)
		if err != nil {
			return fmt.Errorf("line %d: checks.%s: %w", val.Line, key.Value, err)
		}
		p.levels[key.Value] = l
	}
	return nil
}

func configurableChecks() string {
	var names []string
	for _, c := range Checks {
		if c.Name != CheckResponding {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ", ")
}

// maxXID bounds the codes a file may name: the catalog's codes are below
// 200; anything far above is a typo.
const maxXID = 1000

func parseXIDs(f *policyFile, p *Policy) error {
	lists := []struct {
		key   string
		codes []uint64
		level Level
	}{{"xid.fail", f.XID.Fail, LevelFail}, {"xid.warn", f.XID.Warn, LevelWarn}, {"xid.ignore", f.XID.Ignore, LevelOff}}
	where := map[uint64]string{}
	for _, list := range lists {
		for _, code := range list.codes {
			if code == 0 || code > maxXID {
				return fmt.Errorf("%s: %d is not an XID code (1 to %d)", list.key, code, maxXID)
			}
			if prev, dup := where[code]; dup {
				return fmt.Errorf("%s: XID %d is already in %s; name each code once", list.key, code, prev)
			}
			where[code] = list.key
			p.xid[code] = list.level
		}
	}
	return nil
}

func parseWindows(f *policyFile, p *Policy) error {
	for _, w := range []struct {
		key, value string
		into       *time.Duration
	}{{"hw_slowdown_window", f.SlowdownWindow, &p.SlowdownWindow}, {"unresponsive_window", f.UnresponsiveWindow, &p.UnresponsiveWindow}} {
		if w.value == "" {
			continue
		}
		d, err := time.ParseDuration(w.value)
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration (like \"5m\")", w.key, w.value)
		}
		if d <= 0 || d > maxWindow {
			return fmt.Errorf("%s: %s must be above 0 and at most %s", w.key, d, maxWindow)
		}
		*w.into = d
	}
	return nil
}

func parseExpect(f *policyFile, p *Policy) error {
	if f.ExpectGPUs == nil {
		return nil
	}
	if *f.ExpectGPUs < 1 || *f.ExpectGPUs > maxGPUs {
		return fmt.Errorf("expect_gpus: %d must be 1 to %d (leave it out to expect the count found at start)", *f.ExpectGPUs, maxGPUs)
	}
	p.ExpectGPUs = *f.ExpectGPUs
	return nil
}

// maxGPUs bounds --health.expect-gpus: NVML numbers GPUs with an unsigned
// int, but no node has more than a few dozen.
const maxGPUs = 1024

// WithExpectGPUs returns the policy expecting n GPUs (--health.expect-gpus;
// 0 keeps the file's or the first collection's count).
func (p Policy) WithExpectGPUs(n int) (Policy, error) {
	if n < 0 || n > maxGPUs {
		return p, fmt.Errorf("--health.expect-gpus=%d: must be 0 (the count found at start) to %d", n, maxGPUs)
	}
	if n > 0 {
		p.ExpectGPUs = n
	}
	return p, nil
}
