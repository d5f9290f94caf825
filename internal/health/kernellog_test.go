package health

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TestParseKernelLogPinnedLines: every pinned line, each as a public
// report shows it, gives its PCI address, code and (where the prefix
// says) time; a line naming an XID that cannot be read is a warning and
// no XID; other lines are ignored.
func TestParseKernelLogPinnedLines(t *testing.T) {
	f, err := os.Open("testdata/kernel-xid-lines.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	boot := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	sc := bufio.NewScanner(f)
	rows := 0
	for sc.Scan() {
		if sc.Text() == "" || strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		cols := strings.SplitN(sc.Text(), "\t", 5)
		if len(cols) != 5 {
			t.Fatalf("bad row %q", sc.Text())
		}
		rows++
		source, bus, code, timed, line := cols[0], cols[1], cols[2], cols[3], cols[4]
		xids, warnings := ParseKernelLog(strings.NewReader(line+"\n"), boot)
		switch {
		case timed == "ignore":
			if len(xids) != 0 || len(warnings) != 0 {
				t.Errorf("%s: %q: got %v %v, want it ignored", source, line, xids, warnings)
			}
		case bus == "-":
			if len(xids) != 0 || len(warnings) != 1 {
				t.Errorf("%s: %q: got %v %v, want one warning and no XID", source, line, xids, warnings)
			}
		default:
			if len(xids) != 1 || len(warnings) != 0 {
				t.Errorf("%s: %q: got %v %v, want one XID", source, line, xids, warnings)
				continue
			}
			want, _ := strconv.ParseUint(code, 10, 64)
			if xids[0].Bus != bus || xids[0].Code != want {
				t.Errorf("%s: %q: got %s XID %d, want %s XID %s", source, line, xids[0].Bus, xids[0].Code, bus, code)
			}
			if xids[0].Time.IsZero() == (timed == "yes") {
				t.Errorf("%s: %q: time %v, want one read: %s", source, line, xids[0].Time, timed)
			}
		}
	}
	if rows < 10 {
		t.Errorf("only %d pinned lines", rows)
	}
}

func TestParseKernelLogTimes(t *testing.T) {
	boot := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	log := "6,1,1000,-;something else\n" +
		" SUBSYSTEM=pci\n" +
		"4,1577,5140900123,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n" +
		"[ 3600.5] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE\n" +
		"2026-12-02T11:03:04+0100 node kernel: NVRM: Xid (PCI:0000:3b:00): 119, pid=1, GSP\n"
	xids, warnings := ParseKernelLog(strings.NewReader(log), boot)
	if len(warnings) != 0 || len(xids) != 3 {
		t.Fatalf("got %v %v", xids, warnings)
	}
	want := []time.Time{
		boot.Add(5140900123 * time.Microsecond),
		boot.Add(3600*time.Second + 500*time.Millisecond),
		time.Date(2026, 12, 2, 10, 3, 4, 0, time.UTC),
	}
	for i, x := range xids {
		if !x.Time.Equal(want[i]) {
			t.Errorf("XID %d at %v, want %v", x.Code, x.Time, want[i])
		}
	}
	// No boot time: the since-boot prefixes give no time.
	xids, _ = ParseKernelLog(strings.NewReader(log), time.Time{})
	if !xids[0].Time.IsZero() || !xids[1].Time.IsZero() || xids[2].Time.IsZero() {
		t.Errorf("without a boot time: %v", xids)
	}
}

func TestPCIKey(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:3B:00.0": "0000:3b:00",
		"0000:3b:00":       "0000:3b:00",
		"PCI:0001:3b:1f":   "0001:3b:1f",
		"00000001:03:00.1": "0001:03:00",
	} {
		if got, ok := PCIKey(in); !ok || got != want {
			t.Errorf("PCIKey(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "3b:00.0", "0000:3b", "0000:3b:20", "0000:100:00", "0000::00", "x:3b:00"} {
		if got, ok := PCIKey(in); ok {
			t.Errorf("PCIKey(%q) = %q, want no key", in, got)
		}
	}
}

// TestKernelXIDsFailTheirGPU: an XID 79 the kernel logged before the
// run fails the GPU at its PCI address, with the logged time; one logged
// after the start is left to the run's own watcher; an application XID
// does not count; an address with no GPU is a warning.
func TestKernelXIDsFailTheirGPU(t *testing.T) {
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := &snapshot.Snapshot{Time: start.Add(time.Second), Devices: []snapshot.Device{
		{Index: 0, UUID: "GPU-a", Up: true, Info: snapshot.Info{PCIBusID: "00000000:18:00.0"}},
		{Index: 1, UUID: "GPU-b", Up: true, Info: snapshot.Info{PCIBusID: "00000000:3B:00.0"}},
		{Index: 2, UUID: "GPU-c", Up: true, Info: snapshot.Info{PCIBusID: "00000000:5C:00.0"}},
	}}
	j := NewJudge(DefaultPolicy())
	j.Judge(s)
	logged := start.Add(-time.Hour)
	n, warnings := j.RecordKernelXIDs(s, []KernelXID{
		{Bus: "0000:3b:00", Code: 79, Time: logged},
		{Bus: "0000:18:00", Code: 13, Time: logged},
		{Bus: "0000:5c:00", Code: 79, Time: start.Add(time.Millisecond)},
		{Bus: "0000:99:00", Code: 79, Time: logged},
	}, start)
	if n != 2 || len(warnings) != 1 || !strings.Contains(warnings[0], "PCI 0000:99:00") {
		t.Fatalf("recorded %d, warnings %q", n, warnings)
	}
	h := j.Judge(s)
	if h.GPUs[1].Status != snapshot.HealthFail || !strings.Contains(h.GPUs[1].Reason, "XID 79 (at "+logged.Format(time.RFC3339)+")") {
		t.Errorf("GPU 1 = %s %q", h.GPUs[1].Status, h.GPUs[1].Reason)
	}
	if h.GPUs[0].Status != snapshot.HealthOK || h.GPUs[2].Status != snapshot.HealthOK {
		t.Errorf("GPU 0 = %s %q, GPU 2 = %s %q; want ok", h.GPUs[0].Status, h.GPUs[0].Reason, h.GPUs[2].Status, h.GPUs[2].Reason)
	}
}
