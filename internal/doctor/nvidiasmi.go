package doctor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/slurm"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// smiField is one field that gpuwatch and `nvidia-smi --query-gpu` both
// report: how to read gpuwatch's value (in nvidia-smi's unit) and how far
// the two may differ, since the two reads are moments apart.
type smiField struct {
	query string
	unit  string
	ours  func(d *snapshot.Device) (float64, bool)
	// tolerance is absolute, or relative to nvidia-smi's value when rel.
	abs, rel float64
}

const mib = 1 << 20

func clock(d *snapshot.Device, typ string, maxClock bool) (float64, bool) {
	for _, c := range d.Clocks {
		if c.Type == typ {
			if maxClock {
				return c.Max.Get()
			}
			return c.Current.Get()
		}
	}
	return 0, false
}

func u64(o snapshot.Opt[uint64], scale float64) (float64, bool) {
	v, ok := o.Get()
	return float64(v) / scale, ok
}

func ratio(o snapshot.Opt[float64]) (float64, bool) {
	v, ok := o.Get()
	return 100 * v, ok
}

var smiFields = []smiField{
	{"temperature.gpu", "°C", func(d *snapshot.Device) (float64, bool) { return d.Temperature.GPU.Get() }, 3, 0},
	{"power.draw", "W", func(d *snapshot.Device) (float64, bool) { return d.Power.Usage.Get() }, 15, 0.10},
	{"enforced.power.limit", "W", func(d *snapshot.Device) (float64, bool) { return d.Power.EnforcedLimit.Get() }, 1, 0},
	{"memory.total", "MiB", func(d *snapshot.Device) (float64, bool) { return u64(d.Memory.Total, mib) }, 64, 0.02},
	{"memory.used", "MiB", func(d *snapshot.Device) (float64, bool) { return u64(d.Memory.Used, mib) }, 64, 0.02},
	{"clocks.current.sm", "MHz", func(d *snapshot.Device) (float64, bool) { return hz(clock(d, "sm", false)) }, 50, 0.10},
	{"clocks.current.memory", "MHz", func(d *snapshot.Device) (float64, bool) { return hz(clock(d, "memory", false)) }, 50, 0.10},
	{"clocks.max.sm", "MHz", func(d *snapshot.Device) (float64, bool) { return hz(clock(d, "sm", true)) }, 1, 0},
	{"utilization.gpu", "%", func(d *snapshot.Device) (float64, bool) { return ratio(d.Utilization.GPU) }, 20, 0},
	{"utilization.memory", "%", func(d *snapshot.Device) (float64, bool) { return ratio(d.Utilization.Memory) }, 20, 0},
	{"ecc.errors.corrected.volatile.total", "", func(d *snapshot.Device) (float64, bool) { return u64(d.ECC.VolatileCorrected, 1) }, 0, 0},
	{"ecc.errors.uncorrected.volatile.total", "", func(d *snapshot.Device) (float64, bool) { return u64(d.ECC.VolatileUncorrected, 1) }, 0, 0},
	{"pstate", "", func(d *snapshot.Device) (float64, bool) { return intOpt(d.PState) }, 0, 0},
}

func hz(v float64, ok bool) (float64, bool) { return v / 1e6, ok }

func intOpt(o snapshot.Opt[int]) (float64, bool) {
	v, ok := o.Get()
	return float64(v), ok
}

// checkNvidiaSMI puts gpuwatch's readings beside nvidia-smi's, for every
// field both report, and flags each difference beyond the field's
// tolerance: gpuwatch checked against the vendor's tool.
func checkNvidiaSMI(env Env) []Result {
	if env.Backend == "nvidia-smi" {
		return []Result{skip("nvidia-smi", "the readings are nvidia-smi's (--backend=nvidia-smi): nothing else to compare with")}
	}
	if env.NvidiaSMI == "" {
		return []Result{skip("nvidia-smi", "not on PATH; nothing to compare with")}
	}
	if env.Snapshot == nil {
		return nil
	}
	query := []string{"uuid"}
	for _, f := range smiFields {
		query = append(query, f.query)
	}
	timeout := env.NvidiaSMITimeout
	if timeout <= 0 {
		timeout = DefaultNvidiaSMITimeout
	}
	// The runner kills nvidia-smi's whole process group when it times out,
	// prints too much or exits, so no child of a wrapper script survives.
	runner := slurm.ExecRunner{Timeout: timeout, MaxOutput: maxNvidiaSMIOutput}
	out, err := runner.Run(context.Background(), env.NvidiaSMI, "--query-gpu="+strings.Join(query, ","), "--format=csv,noheader,nounits")
	if err != nil {
		return []Result{smiFailure(err, timeout)}
	}
	rows := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		cols := strings.Split(line, ",")
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		if len(cols) != len(query) {
			return []Result{fail("nvidia-smi", fmt.Sprintf("%d columns in %q, asked for %d", len(cols), line, len(query)),
				"an nvidia-smi this old does not know every field; compare by hand with nvidia-smi -q", false)}
		}
		rows[cols[0]] = cols[1:]
	}
	var results []Result
	for i := range env.Snapshot.Devices {
		d := &env.Snapshot.Devices[i]
		check := fmt.Sprintf("nvidia-smi GPU %d", d.Index)
		row, found := rows[d.UUID]
		if !found {
			results = append(results, fail(check, "nvidia-smi does not list "+d.UUID, "gpuwatch and nvidia-smi see different GPUs: check CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES", true))
			continue
		}
		if !d.Up {
			results = append(results, skip(check, "down in gpuwatch ("+d.DownReason+")"))
			continue
		}
		compared, disagree := compareRow(d, row)
		if len(disagree) > 0 {
			results = append(results, fail(check, "disagrees: "+strings.Join(disagree, "; "),
				"a reading off beyond its tolerance: report it with the output of gpuwatch doctor -o json and nvidia-smi -q", true))
			continue
		}
		results = append(results, ok(check, fmt.Sprintf("agrees on %d fields (%s)", len(compared), strings.Join(compared, ", "))))
	}
	return results
}

// DefaultNvidiaSMITimeout bounds the nvidia-smi run. On a node without
// persistence mode nvidia-smi initializes every GPU first, which takes
// seconds on an 8-GPU node; that is slow, not broken.
const DefaultNvidiaSMITimeout = 15 * time.Second

// maxNvidiaSMIOutput caps what nvidia-smi may print: a row is some 200
// bytes, so 1 MiB is thousands of GPUs, and a runaway nvidia-smi (or
// wrapper) cannot fill gpuwatch's memory.
const maxNvidiaSMIOutput = 1 << 20

// smiFailure turns a failed nvidia-smi run into a result whose advice fits
// the failure: a timeout, an output too large or a failing driver.
func smiFailure(err error, timeout time.Duration) Result {
	var ce *slurm.CommandError
	switch {
	case errors.As(err, &ce) && ce.TimedOut:
		return fail("nvidia-smi", fmt.Sprintf("no answer within %v", timeout),
			"nvidia-smi hangs: the driver may be stuck (see dmesg for XIDs), or a GPU without persistence mode is slow to start (nvidia-smi -pm 1); "+
				"the bound is --doctor.nvidia-smi-timeout", false)
	case errors.As(err, &ce) && ce.OutputExceeded:
		return fail("nvidia-smi", fmt.Sprintf("printed more than %d bytes; stopped reading", maxNvidiaSMIOutput),
			"this is not nvidia-smi's CSV: check which program --doctor.nvidia-smi (or PATH) names", false)
	}
	return fail("nvidia-smi", err.Error(), "nvidia-smi itself fails: the driver is in trouble (see dmesg)", false)
}

func compareRow(d *snapshot.Device, row []string) (compared, disagree []string) {
	for i, f := range smiFields {
		theirs, ok := parseSMI(row[i])
		if !ok {
			continue
		}
		ours, present := f.ours(d)
		if !present {
			continue
		}
		tol := math.Max(f.abs, f.rel*math.Abs(theirs))
		compared = append(compared, f.query)
		if math.Abs(ours-theirs) > tol+1e-9 {
			disagree = append(disagree, fmt.Sprintf("%s gpuwatch %s, nvidia-smi %s (tolerance %s)",
				f.query, num(ours, f.unit), num(theirs, f.unit), num(tol, f.unit)))
		}
	}
	return compared, disagree
}

// parseSMI reads one nvidia-smi value: a number, "P0"…"P15", or one of
// its ways of saying absent ("[N/A]", "[Not Supported]", "N/A").
func parseSMI(s string) (float64, bool) {
	if p, ok := strings.CutPrefix(s, "P"); ok {
		s = p
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

func num(v float64, unit string) string {
	s := strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	if unit != "" {
		s += " " + unit
	}
	return s
}
