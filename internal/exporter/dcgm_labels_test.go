package exporter

import (
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TestDCGMOmitsEmptyLabels: like dcgm-exporter, a series carries
// GPU_I_PROFILE, GPU_I_ID, pod, namespace, container and hpc_job only with a
// value, and GPU_I_PROFILE names the GPU instance's profile.
func TestDCGMOmitsEmptyLabels(t *testing.T) {
	s := fullSnapshot(3, 0)
	s.Devices[1].MIGInstances = nil
	s.Devices[2].MIGInstances = []snapshot.MIGInstance{
		{GPUInstanceID: 0, ComputeInstanceID: 0, UUID: "MIG-a", Profile: "4c.7g.80gb", MemoryTotal: someU(80 << 30), MemoryUsed: someU(1 << 30)},
		{GPUInstanceID: 0, ComputeInstanceID: 1, UUID: "MIG-b", Profile: "3c.7g.80gb", MemoryTotal: someU(80 << 30), MemoryUsed: someU(1 << 30)},
	}
	s.Allocations = []snapshot.Allocation{
		{GPU: 1, GPUUUID: s.Devices[1].UUID, Pod: snapshot.Pod{Name: "trainer-0", Namespace: "research", Container: "pytorch"}},
	}
	e := newExporter(t, s, Options{Compat: Compat{DCGM: true}, Hostname: "node-a"})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		labelsOf := func(name, gpu string) [][]string {
			var out [][]string
			for _, mf := range mfs {
				if mf.GetName() != name {
					continue
				}
				for _, m := range mf.GetMetric() {
					var names []string
					values := map[string]string{}
					for _, lp := range m.GetLabel() {
						names = append(names, lp.GetName())
						values[lp.GetName()] = lp.GetValue()
						if lp.GetValue() == "" {
							t.Errorf("%s: empty label %s written", name, lp.GetName())
						}
					}
					if values["gpu"] == gpu {
						out = append(out, names)
					}
				}
			}
			return out
		}
		identity := []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"}
		for _, names := range labelsOf("DCGM_FI_DEV_GPU_TEMP", "0") {
			slices.Sort(names)
			want := slices.Sorted(slices.Values(identity))
			if !slices.Equal(names, want) {
				t.Errorf("GPU 0 (no MIG, no workload): labels %v, want %v", names, want)
			}
		}
		for _, names := range labelsOf("DCGM_FI_DEV_GPU_TEMP", "1") {
			slices.Sort(names)
			want := slices.Sorted(slices.Values(withLabels(identity, "pod", "namespace", "container")))
			if !slices.Equal(names, want) {
				t.Errorf("GPU 1 (a pod, no Slurm job): labels %v, want %v", names, want)
			}
		}
		fb := labelsOf("DCGM_FI_DEV_FB_USED", "2")
		if len(fb) != 1 {
			t.Fatalf("MIG GPU 2: %d FB_USED series, want one per GPU instance", len(fb))
		}
		slices.Sort(fb[0])
		if want := slices.Sorted(slices.Values(withLabels(identity, "GPU_I_PROFILE", "GPU_I_ID"))); !slices.Equal(fb[0], want) {
			t.Errorf("MIG GPU 2: labels %v, want %v", fb[0], want)
		}
	})
	for _, mf := range textGather(t, e) {
		if mf.GetName() != "DCGM_FI_DEV_FB_USED" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["gpu"] == "2" && l["GPU_I_PROFILE"] != "7g.80gb" {
				t.Errorf("GPU 2: GPU_I_PROFILE = %q, want the GPU instance's profile 7g.80gb", l["GPU_I_PROFILE"])
			}
		}
	}
	got, _ := dcgmValues(t, s, Compat{DCGM: true})
	if _, ok := got["DCGM_FI_DEV_FB_USED/2/0/"]; !ok {
		t.Errorf("no FB_USED for GPU instance 0 of GPU 2: %v", keysWith(got, "FB_USED"))
	}
}

func TestGPUInstanceProfile(t *testing.T) {
	for in, want := range map[string]string{
		"4c.7g.80gb": "7g.80gb", "1c.2g.20gb": "2g.20gb", "7g.80gb": "7g.80gb", "1g.10gb": "1g.10gb",
		"1g.10gb+me": "1g.10gb+me", "1c.1g.10gb+me": "1g.10gb+me", "c.7g.80gb": "c.7g.80gb", "": "",
	} {
		if got := gpuInstanceProfile(in); got != want {
			t.Errorf("gpuInstanceProfile(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDCGMHostnameLabelSwitch: the host's name goes in Hostname (every
// dcgm-exporter release up to 4.5.3-4.8.2) or, with HostnameLowerCase, in
// hostname (its next release, upstream #655), never in both.
func TestDCGMHostnameLabelSwitch(t *testing.T) {
	for _, lower := range []bool{false, true} {
		want, other := DCGMHostnameLabel, DCGMHostnameLabelLower
		if lower {
			want, other = other, want
		}
		e := newExporter(t, fullSnapshot(2, 0), Options{Compat: Compat{DCGM: true}, Hostname: "node-a", HostnameLowerCase: lower})
		both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
			n := 0
			for _, mf := range mfs {
				if !strings.HasPrefix(mf.GetName(), "DCGM_") {
					continue
				}
				for _, m := range mf.GetMetric() {
					l := map[string]string{}
					for _, lp := range m.GetLabel() {
						l[lp.GetName()] = lp.GetValue()
					}
					if _, ok := l[other]; ok || l[want] != "node-a" {
						t.Fatalf("lower case %v: %s has %s=%q and %s=%q, want only %s", lower, mf.GetName(), want, l[want], other, l[other], want)
					}
					n++
				}
			}
			if n == 0 {
				t.Fatal("no DCGM series")
			}
		})
	}
}

// TestDCGMNVLinkBandwidthUnit: DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL is a rate
// in MiB/s (transmit plus receive, all links), from GPM where the GPU has
// it and from the links' byte counters elsewhere.
func TestDCGMNVLinkBandwidthUnit(t *testing.T) {
	s := fullSnapshot(3, 0)
	s.Allocations = nil
	s.Devices[0].GPM.NVLinkTxBytesPerSecond, s.Devices[0].GPM.NVLinkRxBytesPerSecond = some(300*mib), some(105*mib)
	s.Devices[1].GPM = snapshot.GPM{}
	s.Devices[1].MIGInstances = nil
	s.Devices[1].NVLinkBytesPerSecond = some(2000 * mib)
	s.Devices[2].GPM = snapshot.GPM{}
	s.Devices[2].NVLinkBytesPerSecond = snapshot.Opt[float64]{}
	got, _ := dcgmValues(t, s, Compat{DCGM: true})
	for key, want := range map[string]float64{
		"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL/0//": 405,
		"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL/1//": 2000,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v MiB/s", key, v, ok, want)
		}
	}
	if v, ok := got["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL/2//"]; ok {
		t.Errorf("GPU 2 without a rate has NVLINK_BANDWIDTH_TOTAL %v; absent is never 0", v)
	}
}

// TestDCGMVGPULicenseStatus: 0 where NVML says the GPU is not a vGPU guest
// (DCGM's answer on bare metal), absent where the mode is unknown or the
// GPU is a vGPU guest (its license is not read).
func TestDCGMVGPULicenseStatus(t *testing.T) {
	s := fullSnapshot(4, 0)
	s.Allocations = nil
	s.Devices[1].MIGInstances = nil
	for i, mode := range []string{"none", "passthrough", "vgpu", ""} {
		s.Devices[i].Info.VirtualizationMode = mode
	}
	got, _ := dcgmValues(t, s, Compat{DCGM: true})
	for gpu, want := range map[string]bool{"0": true, "1": true, "2": false, "3": false} {
		v, ok := got["DCGM_FI_DEV_VGPU_LICENSE_STATUS/"+gpu+"//"]
		if ok != want || v != 0 {
			t.Errorf("GPU %s: VGPU_LICENSE_STATUS = %v (present %v), want present %v with 0", gpu, v, ok, want)
		}
	}
}
