//go:build cgo

package sim

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// uuids returns every GPU and MIG device UUID and serial of a simulated host.
func uuids(t *testing.T, cfg Config) []string {
	t.Helper()
	s := newSim(t, cfg)
	var out []string
	n, _ := s.DeviceGetCount()
	for i := range n {
		d := handle(t, s, i)
		u, _ := d.GetUUID()
		serial, _ := d.GetSerial()
		out = append(out, u, serial)
		count, _ := d.GetMaxMigDeviceCount()
		for j := range count {
			m, r := d.GetMigDeviceHandleByIndex(j)
			if r != nvml.SUCCESS {
				continue
			}
			mu, _ := m.GetUUID()
			out = append(out, mu)
		}
	}
	return out
}

// TestSeedMakesIdentifiersPerHost: two simulated hosts with one profile
// must not share a UUID (PromQL joins on uuid would mix them), and one host
// keeps its identifiers across restarts.
func TestSeedMakesIdentifiersPerHost(t *testing.T) {
	nodeA := uuids(t, Config{Profile: "dgx-h100", Seed: "node-a"})
	again := uuids(t, Config{Profile: "dgx-h100", Seed: "node-a"})
	nodeB := uuids(t, Config{Profile: "dgx-h100", Seed: "node-b"})
	unseeded := uuids(t, Config{Profile: "dgx-h100"})
	if len(nodeA) < 8*2+4 {
		t.Fatalf("only %d identifiers: %v", len(nodeA), nodeA)
	}
	seen := map[string]bool{}
	for i := range nodeA {
		if nodeA[i] != again[i] {
			t.Errorf("identifier %d changed between two starts with one seed: %s, %s", i, nodeA[i], again[i])
		}
		if nodeA[i] == nodeB[i] || nodeA[i] == unseeded[i] {
			t.Errorf("identifier %d is shared by two hosts: %s", i, nodeA[i])
		}
		seen[nodeA[i]] = true
	}
	if len(seen) != len(nodeA) {
		t.Errorf("identifiers repeat within one host: %v", nodeA)
	}
	// Without a seed the profile's own UUIDs stay what they were.
	if want := "GPU-" + stableUUID("dgx-h100", "0"); unseeded[0] != want {
		t.Errorf("unseeded GPU 0 UUID = %s, want %s", unseeded[0], want)
	}
}

func TestProcessesListsEveryPlacedProcess(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-h100", Seed: "x"})
	procs := s.Processes()
	if len(procs) != 8 {
		t.Fatalf("%d processes, want the profile's 8: %+v", len(procs), procs)
	}
	d := handle(t, s, procs[7].GPU)
	if u, _ := d.GetUUID(); u != procs[7].GPUUUID || procs[7].PID != 95120 {
		t.Errorf("last process = %+v, GPU UUID %s", procs[7], u)
	}
}
