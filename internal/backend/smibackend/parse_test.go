package smibackend

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/backend/smibackend/smifixture"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func allGroups() map[string]bool {
	g := map[string]bool{}
	for _, name := range snapshot.AllGroups {
		g[name] = true
	}
	return g
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseFixture asks the fixture what a reader of the driver whose help
// text is help asks, and parses the answer.
func parseFixture(t *testing.T, help, gpus string) (table, query) {
	t.Helper()
	q, err := plan(parseHelp(fixture(t, help)), allGroups())
	if err != nil {
		t.Fatal(err)
	}
	out, err := smifixture.Answer(fixture(t, help), fixture(t, gpus), q.names)
	if err != nil {
		t.Fatalf("the fixture nvidia-smi refuses the query: %v", err)
	}
	return parseGPUs(out, q), q
}

func problemsOf(t table, gpu int) map[string]State {
	out := map[string]State{}
	for _, p := range t.problems {
		if p.gpu == gpu {
			out[p.name] = p.state
		}
	}
	return out
}

func TestParseHelpListsEveryName(t *testing.T) {
	names := parseHelp(fixture(t, "help-query-gpu-r550.txt"))
	for _, want := range []string{"index", "uuid", "name", "gpu_name", "retired_pages.sbe", "clocks_event_reasons.sw_power_cap", "mig.mode.pending"} {
		if !names[want] {
			t.Errorf("help lists no %q", want)
		}
	}
	if names["List of valid properties to query for the switch"] || len(names) != 79 {
		t.Errorf("%d names, want 79 (the distinct quoted names of 67 paragraphs): %v", len(names), names)
	}
}

// An R470 nvidia-smi knows the throttle reasons by their old names and
// lacks properties added later: the query uses the old names and leaves
// the others out, each missing one listed with its group.
func TestPlanOfAnOlderDriver(t *testing.T) {
	q, err := plan(parseHelp(fixture(t, "help-query-gpu-r470.txt")), allGroups())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(q.names, "clocks_throttle_reasons.sw_power_cap") || slices.Contains(q.names, "clocks_event_reasons.sw_power_cap") {
		t.Errorf("query %v: want the pre-R535 reason names", q.names)
	}
	for group, want := range map[string]string{snapshot.GroupTemperature: "temperature.memory", snapshot.GroupMemory: "memory.reserved", snapshot.GroupInfo: "compute_cap"} {
		if !slices.Contains(q.missing[group], want) {
			t.Errorf("missing[%s] = %v, want %s", group, q.missing[group], want)
		}
	}
	known := parseHelp(fixture(t, "help-query-gpu-r470.txt"))
	for _, n := range q.names {
		if !known[n] {
			t.Errorf("the query asks for %q, which this driver refuses", n)
		}
	}
}

func TestPlanAsksOnlyForEnabledGroups(t *testing.T) {
	q, err := plan(parseHelp(fixture(t, "help-query-gpu-r550.txt")), map[string]bool{snapshot.GroupPower: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range q.names {
		if strings.HasPrefix(n, "temperature") || strings.HasPrefix(n, "ecc.errors") || strings.HasPrefix(n, "clocks") {
			t.Errorf("query asks for %s of a disabled group: %v", n, q.names)
		}
	}
	if !slices.Contains(q.names, "power.draw") || !slices.Contains(q.names, "uuid") {
		t.Errorf("query %v lacks power.draw or uuid", q.names)
	}
}

func TestPlanRefusesAHelpWithoutUUIDs(t *testing.T) {
	_, err := plan(parseHelp([]byte("<html>502 Bad Gateway</html>")), allGroups())
	if err == nil || !strings.Contains(err.Error(), `"index"`) {
		t.Fatalf("err = %v, want one naming the missing index property", err)
	}
}

func TestParseDatacenter(t *testing.T) {
	tab, _ := parseFixture(t, "help-query-gpu-r550.txt", "gpu-h100.csv")
	if len(tab.devices) != 2 || tab.garbageRows != 0 || tab.driver != "550.90.07" {
		t.Fatalf("devices %d, garbage %d, driver %q", len(tab.devices), tab.garbageRows, tab.driver)
	}
	d := tab.devices[0]
	checks := []struct {
		name string
		ok   bool
	}{
		{"up", d.Up && d.Index == 0 && d.UUID == "GPU-2f4a8e61-7c3b-4d0e-9a15-60b1c2d3e4f5"},
		{"info", d.Info.Name == "NVIDIA H100 80GB HBM3" && d.Info.PCIBusID == "00000000:18:00.0" && d.Info.ComputeCapability == "9.0" &&
			d.Info.PersistenceMode == "enabled" && d.Info.ComputeMode == "default" && d.Info.ECCMode == "enabled" && d.Info.MIGMode == "disabled"},
		{"utilization", d.Utilization.GPU == snapshot.Some(0.87) && d.Utilization.Memory == snapshot.Some(0.41) && d.Utilization.Encoder == snapshot.Some(0.0)},
		{"memory", d.Memory.Total == snapshot.Some(uint64(81559)<<20) && d.Memory.Used == snapshot.Some(uint64(20999)<<20) && d.Memory.Reserved == snapshot.Some(uint64(579)<<20)},
		{"temperature", d.Temperature.GPU == snapshot.Some(52.0) && d.Temperature.Memory == snapshot.Some(38.0)},
		{"fan absent", !d.FanSpeed.Valid},
		{"power", d.Power.Usage == snapshot.Some(498.2) && d.Power.EnforcedLimit == snapshot.Some(700.0) && d.Power.MinLimit == snapshot.Some(200.0) && !d.Power.Energy.Valid},
		{"clocks", len(d.Clocks) == 4 && d.Clocks[0] == snapshot.Clock{Type: "graphics", Current: snapshot.Some(1980e6), Max: snapshot.Some(1980e6)}},
		{"pstate", d.PState == snapshot.Some(0)},
		{"events", len(d.ClockEvents) == 8 && slices.Contains(d.ClockEvents, snapshot.ClockEvent{Reason: "sw_power_cap", Active: true}) &&
			slices.Contains(d.ClockEvents, snapshot.ClockEvent{Reason: "gpu_idle", Active: false})},
		{"pcie", d.PCIe.LinkGen == snapshot.Some(5) && d.PCIe.MaxLinkWidth == snapshot.Some(16) && !d.PCIe.TxBytes.Valid},
		{"ecc", d.ECC.VolatileCorrected == snapshot.Some(uint64(3)) && d.ECC.AggregateCorrected == snapshot.Some(uint64(17)) && d.ECC.VolatileUncorrected == snapshot.Some(uint64(0))},
		{"retired pages absent (Hopper remaps rows)", !d.ECC.RetiredPagesSingleBit.Valid && !d.ECC.RetiredPagesPending.Valid},
		{"remapped rows", d.ECC.RemappedRowsCorrectable == snapshot.Some(uint64(0)) && d.ECC.RemappedRowsPending == snapshot.Some(false)},
		{"no MIG change pending", d.MIGModePending == snapshot.Some(false)},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: %+v", c.name, d)
		}
	}
	for name, state := range problemsOf(tab, 0) {
		if state != NotAvailable {
			t.Errorf("%s: %s, want only [N/A] fields", name, state)
		}
	}
}

func TestParseGeForce(t *testing.T) {
	tab, _ := parseFixture(t, "help-query-gpu-r550.txt", "gpu-geforce.csv")
	d := tab.devices[0]
	if !d.Up || d.FanSpeed != snapshot.Some(0.30) || d.Info.ECCMode != "" || d.Info.PersistenceMode != "" || d.Info.MIGMode != "" || d.MIGModePending.Valid {
		t.Errorf("GeForce: %+v", d)
	}
	if d.ECC != (snapshot.ECC{}) || d.Temperature.Memory.Valid {
		t.Errorf("[N/A] readings are not absent: ECC %+v, memory temperature %+v", d.ECC, d.Temperature.Memory)
	}
	if d.Power.Usage != snapshot.Some(118.43) || d.Power.MaxLimit != snapshot.Some(600.0) {
		t.Errorf("power %+v", d.Power)
	}
	if p := problemsOf(tab, 0); p["ecc.errors.corrected.volatile.total"] != NotAvailable || p["temperature.memory"] != NotAvailable {
		t.Errorf("problems %v", p)
	}
}

func TestParseMIGOnAnOlderDriver(t *testing.T) {
	tab, _ := parseFixture(t, "help-query-gpu-r470.txt", "gpu-a100-mig-r470.csv")
	if len(tab.devices) != 2 {
		t.Fatalf("%d devices", len(tab.devices))
	}
	for i, wantPending := range []bool{false, true} {
		d := tab.devices[i]
		if d.Info.MIGMode != "enabled" || d.MIGModePending != snapshot.Some(wantPending) {
			t.Errorf("GPU %d: MIG mode %q, pending %+v, want enabled, %v", i, d.Info.MIGMode, d.MIGModePending, wantPending)
		}
		if d.Utilization.GPU.Valid || d.Utilization.Memory.Valid {
			t.Errorf("GPU %d: utilization under MIG %+v, want absent", i, d.Utilization)
		}
		if len(d.ClockEvents) != 8 || d.ECC.RetiredPagesPending != snapshot.Some(false) {
			t.Errorf("GPU %d: events %v, retired pending %+v", i, d.ClockEvents, d.ECC.RetiredPagesPending)
		}
	}
}

func TestParseGPUsInError(t *testing.T) {
	tab, _ := parseFixture(t, "help-query-gpu-r550.txt", "gpu-in-error.csv")
	if len(tab.devices) != 3 {
		t.Fatalf("%d devices: %+v", len(tab.devices), tab.devices)
	}
	d0 := tab.devices[0]
	if !d0.Up || d0.Temperature.GPU.Valid || d0.Power.Usage.Valid || d0.Memory.Used != snapshot.Some(uint64(20999)<<20) {
		t.Errorf("GPU 0 (two failed reads): %+v", d0)
	}
	if p := problemsOf(tab, 0); p["temperature.gpu"] != ReadError || p["power.draw"] != ReadError {
		t.Errorf("GPU 0 problems %v, want temperature.gpu and power.draw read errors", p)
	}
	if d1 := tab.devices[1]; d1.Up || d1.DownReason != "unknown_error" || d1.Info.PCIBusID != "0000:2A:00.0" || d1.Index != 1 {
		t.Errorf("GPU 1 (unreachable): %+v", d1)
	}
	if d2 := tab.devices[2]; d2.Up || d2.DownReason != "gpu_is_lost" || d2.UUID != "GPU-0c1d2e3f-4a5b-4c6d-9e7f-8091a2b3c4d5" || d2.Memory.Total.Valid {
		t.Errorf("GPU 2 (lost): %+v", d2)
	}
}

func TestParseDecimalCommas(t *testing.T) {
	tab, _ := parseFixture(t, "help-query-gpu-r550.txt", "gpu-localized.csv")
	d := tab.devices[0]
	if d.Power.Usage != snapshot.Some(498.2) || d.Power.EnforcedLimit != snapshot.Some(700.0) || len(tab.problems) != len(problemsOf(tab, 0)) {
		t.Errorf("power %+v", d.Power)
	}
	for name, state := range problemsOf(tab, 0) {
		if state == Garbage {
			t.Errorf("%s is garbage", name)
		}
	}
}

func TestParseGarbage(t *testing.T) {
	tab, _ := parseFixture(t, "help-query-gpu-r550.txt", "gpu-garbage.csv")
	if len(tab.devices) != 1 || tab.garbageRows != 2 {
		t.Fatalf("%d devices, %d garbage rows; want the one whole row and 2 garbage lines", len(tab.devices), tab.garbageRows)
	}
	d := tab.devices[0]
	p := problemsOf(tab, 0)
	for _, name := range []string{"power.draw", "temperature.gpu", "memory.used", "memory.total", "pstate", "remapped_rows.pending", "clocks.current.graphics", "clocks_event_reasons.gpu_idle"} {
		if p[name] != Garbage {
			t.Errorf("%s: %s, want garbage", name, p[name])
		}
	}
	if d.Power.Usage.Valid || d.Temperature.GPU.Valid || d.Memory.Used.Valid || d.Memory.Total.Valid || d.PState.Valid || d.ECC.RemappedRowsPending.Valid {
		t.Errorf("a garbage value made a reading: %+v", d)
	}
	if g := clockOf(&d, "graphics"); g.Current.Valid || g.Max != snapshot.Some(1980e6) || len(d.ClockEvents) != 7 {
		t.Errorf("clocks %+v, events %v", d.Clocks, d.ClockEvents)
	}
	if !d.Up || d.Memory.Free != snapshot.Some(uint64(59981)<<20) {
		t.Errorf("the row's good readings are lost: %+v", d)
	}
}

func TestParseProcesses(t *testing.T) {
	tab, _ := parseFixture(t, "help-query-gpu-r550.txt", "gpu-h100.csv")
	procs, garbage := parseProcesses(smifixture.Rows(fixture(t, "apps-garbage.csv")), tab.devices)
	if garbage != 4 {
		t.Errorf("garbage = %d, want 4 (an unknown GPU, a bad PID, a unit, a line of noise)", garbage)
	}
	want := []snapshot.Process{
		{GPU: 0, GPUUUID: "GPU-2f4a8e61-7c3b-4d0e-9a15-60b1c2d3e4f5", PID: 4242, Type: "compute", UsedMemory: snapshot.Some(uint64(1024) << 20)},
		{GPU: 0, GPUUUID: "GPU-2f4a8e61-7c3b-4d0e-9a15-60b1c2d3e4f5", PID: 4244, Type: "compute"},
	}
	if !slices.Equal(procs, want) {
		t.Errorf("processes\n%+v\nwant\n%+v", procs, want)
	}
	mig, _ := parseFixture(t, "help-query-gpu-r470.txt", "gpu-a100-mig-r470.csv")
	procs, garbage = parseProcesses(smifixture.Rows(fixture(t, "apps-mig.csv")), mig.devices)
	if garbage != 0 || len(procs) != 1 || procs[0].UsedMemory.Valid || procs[0].PID != 5151 {
		t.Errorf("MIG process %+v (garbage %d), want PID 5151 with its memory absent", procs, garbage)
	}
}

func TestNumber(t *testing.T) {
	for in, want := range map[string]float64{"42": 42, " 73.51 ": 73.51, "73,51": 73.51, "0": 0, "-3.5": -3.5} {
		if got, err := number(in); err != nil || got != want {
			t.Errorf("number(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1,234.5", "1,2,3", "12 W", "NaN", "Inf", "0x1F", "1e3", "1_000", "P0"} {
		if got, err := number(in); err == nil {
			t.Errorf("number(%q) = %v, want garbage", in, got)
		}
	}
}

func TestClassify(t *testing.T) {
	for in, want := range map[string]State{
		"[N/A]": NotAvailable, "N/A": NotAvailable, "[Not Supported]": NotSupported, "[Unknown Error]": ReadError,
		"[Insufficient Permissions]": ReadError, "[GPU is lost]": GPULost, "42": Present, "Enabled": Present,
	} {
		if got := classify(in); got != want {
			t.Errorf("classify(%q) = %s, want %s", in, got, want)
		}
	}
}
