package exporter

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// upstreamDir holds dcgm-exporter's released files the compat tests compare
// against (see its README.md for the release and commit).
var upstreamDir = filepath.Join("testdata", "dcgm-exporter")

// TestXIDMessagesMatchUpstream compares the err_msg table, code by code,
// with dcgm-exporter's (testdata/dcgm-exporter/xid-messages.tsv).
func TestXIDMessagesMatchUpstream(t *testing.T) {
	f, err := os.Open(filepath.Join(upstreamDir, "xid-messages.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		code, msg, ok := strings.Cut(sc.Text(), "\t")
		c, err := strconv.ParseUint(code, 10, 64)
		if !ok || err != nil {
			t.Fatalf("xid-messages.tsv line %d: %q is not CODE<TAB>MESSAGE", n+1, sc.Text())
		}
		if c != uint64(n) {
			t.Fatalf("xid-messages.tsv line %d: code %d, want %d (the table has no gaps)", n+1, c, n)
		}
		if got := xidMessage(c); got != msg {
			t.Errorf("err_msg for XID %d = %q, dcgm-exporter writes %q", c, got, msg)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(xidMessages) {
		t.Errorf("gpuwatch has %d XID messages, dcgm-exporter %d", len(xidMessages), n)
	}
	if got := xidMessage(uint64(n)); got != "Unknown Error" {
		t.Errorf("err_msg beyond the table = %q, dcgm-exporter writes \"Unknown Error\"", got)
	}
}

// TestDCGMXIDLabels: every DCGM_FI_DEV_XID_ERRORS sample carries err_code
// (the value again) and err_msg, as dcgm-exporter's do, so alerts written as
// DCGM_FI_DEV_XID_ERRORS{err_code=~"48|79"} fire.
func TestDCGMXIDLabels(t *testing.T) {
	s := fullSnapshot(3, 0)
	s.Allocations = nil
	s.Devices[1].MIGInstances = nil
	s.Devices[0].XIDLastCode = someU(79)
	s.Devices[1].XIDLastCode = someU(0)
	s.Devices[2].XIDLastCode = someU(4000)
	want := map[string][2]string{
		"0": {"79", "GPU has fallen off the bus"},
		"1": {"0", "No Error"},
		"2": {"4000", "Unknown Error"},
	}
	e := newExporter(t, s, Options{Compat: Compat{DCGM: true}, Hostname: "node-a"})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		seen := 0
		for _, mf := range mfs {
			if mf.GetName() != "DCGM_FI_DEV_XID_ERRORS" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				w, ok := want[l["gpu"]]
				if !ok {
					t.Errorf("unexpected series %v", l)
					continue
				}
				seen++
				if l["err_code"] != w[0] || l["err_msg"] != w[1] {
					t.Errorf("GPU %s: err_code=%q err_msg=%q, want %q %q", l["gpu"], l["err_code"], l["err_msg"], w[0], w[1])
				}
				if v := m.GetGauge().GetValue(); strconv.FormatFloat(v, 'f', -1, 64) != w[0] {
					t.Errorf("GPU %s: value %v, want %s", l["gpu"], v, w[0])
				}
			}
		}
		if seen != len(want) {
			t.Errorf("%d XID series, want %d", seen, len(want))
		}
	})
}
