//go:build cgo

package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// A consumer card answers NOT_SUPPORTED for datacenter-only reads, and
// still answers the rest.
func TestRTX4090NotSupported(t *testing.T) {
	s := newSim(t, Config{Profile: "rtx4090", PinTime: pinAt(time.Minute)})
	d := handle(t, s, 0)
	notSupported := map[string]nvml.Return{}
	_, _, notSupported["GetEccMode"] = d.GetEccMode()
	_, notSupported["GetTotalEccErrors"] = d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	_, notSupported["GetNvLinkState"] = d.GetNvLinkState(0)
	_, notSupported["GetNvLinkErrorCounter"] = d.GetNvLinkErrorCounter(0, nvml.NVLINK_ERROR_DL_REPLAY)
	_, notSupported["FI_DEV_NVLINK_LINK_COUNT"] = fieldULL(t, d, nvml.FI_DEV_NVLINK_LINK_COUNT, 0)
	_, notSupported["FI_DEV_NVLINK_THROUGHPUT_DATA_TX"] = fieldULL(t, d, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0)
	_, notSupported["FI_DEV_MEMORY_TEMP"] = fieldULL(t, d, nvml.FI_DEV_MEMORY_TEMP, 0)
	_, notSupported["GetTemperatureThreshold(MEM_MAX)"] = d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_MEM_MAX)
	_, _, _, _, notSupported["GetRemappedRows"] = d.GetRemappedRows()
	_, notSupported["GetRetiredPages"] = d.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
	_, notSupported["GetRetiredPagesPendingStatus"] = d.GetRetiredPagesPendingStatus()
	_, _, notSupported["GetMigMode"] = d.GetMigMode()
	_, notSupported["GetSerial"] = d.GetSerial()
	sample, _ := s.GpmSampleAlloc()
	notSupported["GpmSampleGet"] = s.GpmSampleGet(d, sample)
	for call, r := range notSupported {
		if r != nvml.ERROR_NOT_SUPPORTED {
			t.Errorf("%s = %v, want ERROR_NOT_SUPPORTED", call, r)
		}
	}
	if sup, r := d.GpmQueryDeviceSupport(); r != nvml.SUCCESS || sup.IsSupportedDevice != 0 {
		t.Errorf("GpmQueryDeviceSupport = %+v %v", sup, r)
	}
	if n, r := d.GetMaxMigDeviceCount(); n != 0 || r != nvml.SUCCESS {
		t.Errorf("GetMaxMigDeviceCount = %d %v", n, r)
	}

	works := map[string]nvml.Return{}
	_, works["GetUtilizationRates"] = d.GetUtilizationRates()
	_, works["GetFanSpeed"] = d.GetFanSpeed()
	_, works["GetFanSpeed_v2(1)"] = d.GetFanSpeed_v2(1)
	_, works["GetPowerUsage"] = d.GetPowerUsage()
	_, works["GetTotalEnergyConsumption"] = d.GetTotalEnergyConsumption()
	_, works["GetTemperatureThreshold(SLOWDOWN)"] = d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
	_, works["FI_DEV_PCIE_COUNT_TX_BYTES"] = fieldULL(t, d, nvml.FI_DEV_PCIE_COUNT_TX_BYTES, 0)
	_, works["GetProcessUtilization"] = d.GetProcessUtilization(0)
	for call, r := range works {
		if r != nvml.SUCCESS {
			t.Errorf("%s = %v, want SUCCESS", call, r)
		}
	}
	if b, _ := d.GetBrand(); b != nvml.BRAND_GEFORCE {
		t.Errorf("brand %v", b)
	}
	if m, _ := d.GetMemoryInfo(); m.Total != 24564*mib {
		t.Errorf("memory %d", m.Total)
	}
	if n, _ := d.GetNumFans(); n != 2 {
		t.Errorf("fans %d", n)
	}
	// A graphics process (Xorg) shows in the graphics list only.
	g, _ := d.GetGraphicsRunningProcesses()
	c, _ := d.GetComputeRunningProcesses()
	if len(g) != 1 || len(c) != 1 || g[0].Pid == c[0].Pid {
		t.Errorf("graphics %+v compute %+v", g, c)
	}
}

func TestSXMHasNoFans(t *testing.T) {
	d := handle(t, newSim(t, Config{Profile: "h100"}), 0)
	if _, r := d.GetNumFans(); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetNumFans on SXM: %v", r)
	}
	if _, r := d.GetFanSpeed(); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetFanSpeed on SXM: %v", r)
	}
}

func TestLargeProfile(t *testing.T) {
	s := newSim(t, Config{Profile: "large"})
	if n, _ := s.DeviceGetCount(); n != 64 {
		t.Fatalf("count %d", n)
	}
	buses := map[string]bool{}
	for i := range 64 {
		pci, _ := handle(t, s, i).GetPciInfo()
		buses[cString(pci.BusId[:])] = true
	}
	if len(buses) != 64 {
		t.Errorf("%d distinct PCI bus ids for 64 GPUs", len(buses))
	}
}

func TestMIGEnumeration(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-a100-mig", PinTime: pinAt(time.Minute)})
	wantMIGDevices := map[int]int{0: 7, 1: 2, 2: 2, 3: 4}
	for i := range 8 {
		d := handle(t, s, i)
		cur, pending, r := d.GetMigMode()
		want, inMIG := wantMIGDevices[i]
		if r != nvml.SUCCESS || (cur == nvml.DEVICE_MIG_ENABLE) != inMIG || cur != pending {
			t.Fatalf("gpu %d GetMigMode = %d %d %v", i, cur, pending, r)
		}
		max, r := d.GetMaxMigDeviceCount()
		if !inMIG {
			if max != 0 || r != nvml.SUCCESS {
				t.Errorf("gpu %d (no MIG) GetMaxMigDeviceCount = %d %v", i, max, r)
			}
			continue
		}
		if _, r := d.GetUtilizationRates(); r != nvml.ERROR_NOT_SUPPORTED {
			t.Errorf("gpu %d: utilization in MIG mode = %v", i, r)
		}
		found := 0
		for j := range max {
			m, r := d.GetMigDeviceHandleByIndex(j)
			if r == nvml.ERROR_NOT_FOUND {
				continue
			}
			if r != nvml.SUCCESS {
				t.Fatalf("gpu %d GetMigDeviceHandleByIndex(%d): %v", i, j, r)
			}
			found++
			if is, _ := m.IsMigDeviceHandle(); !is {
				t.Errorf("IsMigDeviceHandle false")
			}
			if parent, r := m.GetDeviceHandleFromMigDeviceHandle(); r != nvml.SUCCESS || parent != d {
				t.Errorf("parent %v", r)
			}
			uuid, _ := m.GetUUID()
			name, _ := m.GetName()
			gi, _ := m.GetGpuInstanceId()
			ci, _ := m.GetComputeInstanceId()
			mem, r := m.GetMemoryInfo()
			if !strings.HasPrefix(uuid, "MIG-") || !strings.HasPrefix(name, "NVIDIA A100-SXM4-80GB MIG ") || r != nvml.SUCCESS {
				t.Errorf("MIG device %q %q %v", uuid, name, r)
			}
			if mem.Used+mem.Free != mem.Total || mem.Total > 81920*mib {
				t.Errorf("MIG memory %+v", mem)
			}
			if byUUID, r := s.DeviceGetHandleByUUID(uuid); r != nvml.SUCCESS || byUUID != m {
				t.Errorf("DeviceGetHandleByUUID(%s): %v", uuid, r)
			}
			// Processes on the MIG handle carry its instance IDs.
			procs, _ := m.GetComputeRunningProcesses()
			for _, p := range procs {
				if int(p.GpuInstanceId) != gi || int(p.ComputeInstanceId) != ci {
					t.Errorf("process %+v on MIG device gi %d ci %d", p, gi, ci)
				}
			}
		}
		if found != want {
			t.Errorf("gpu %d: %d MIG devices, want %d", i, found, want)
		}
		if _, r := d.GetMigDeviceHandleByIndex(max); r != nvml.ERROR_INVALID_ARGUMENT {
			t.Errorf("index past max: %v", r)
		}
	}

	// The GPU 0 layout is seven 1g.10gb instances, GPU instance ids 7-13.
	m, _ := handle(t, s, 0).GetMigDeviceHandleByIndex(0)
	if name, _ := m.GetName(); name != "NVIDIA A100-SXM4-80GB MIG 1g.10gb" {
		t.Errorf("name %q", name)
	}
	if gi, _ := m.GetGpuInstanceId(); gi != 7 {
		t.Errorf("gpu instance %d", gi)
	}
	if mem, _ := m.GetMemoryInfo(); mem.Total != 9728*mib {
		t.Errorf("1g.10gb memory %d MiB", mem.Total/mib)
	}
	// GPU 2's 7g.80gb instance is split into two compute instances.
	m, _ = handle(t, s, 2).GetMigDeviceHandleByIndex(0)
	if name, _ := m.GetName(); name != "NVIDIA A100-SXM4-80GB MIG 4c.7g.80gb" {
		t.Errorf("name %q", name)
	}

	// The parent's list is for privileged callers only (nvml.h); the
	// per-instance lists carry the instance ids.
	if _, r := handle(t, s, 1).GetComputeRunningProcesses(); r != nvml.ERROR_NO_PERMISSION {
		t.Errorf("MIG parent process list: %v, want NO_PERMISSION", r)
	}
	var gis []uint32
	n, _ := handle(t, s, 1).GetMaxMigDeviceCount()
	for i := range n {
		m, r := handle(t, s, 1).GetMigDeviceHandleByIndex(i)
		if r != nvml.SUCCESS {
			continue
		}
		procs, _ := m.GetComputeRunningProcesses()
		for _, p := range procs {
			gis = append(gis, p.GpuInstanceId)
		}
	}
	if len(gis) != 2 || gis[0] != 1 || gis[1] != 2 {
		t.Errorf("gpu 1 processes in GPU instances %v, want [1 2]", gis)
	}
	if _, r := handle(t, s, 1).GetProcessUtilization(0); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("process utilization in MIG mode: %v", r)
	}
	if _, r := handle(t, s, 5).GetProcessUtilization(0); r != nvml.SUCCESS {
		t.Errorf("process utilization without MIG: %v", r)
	}
}

func TestMIGInstanceObjects(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-a100-mig", Privileged: true})
	d := handle(t, s, 3)
	info, r := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if r != nvml.SUCCESS || info.SliceCount != 1 || info.MemorySizeMB != 9728 {
		t.Fatalf("profile info %+v %v", info, r)
	}
	gis, r := d.GetGpuInstances(&info)
	if r != nvml.SUCCESS || len(gis) != 2 {
		t.Fatalf("1-slice GPU instances on gpu 3: %d %v", len(gis), r)
	}
	giInfo, _ := gis[0].GetInfo()
	if giInfo.Device != d || giInfo.Id != 13 {
		t.Errorf("gi info %+v", giInfo)
	}
	ciProfile, r := gis[0].GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if r != nvml.SUCCESS {
		t.Fatal(r)
	}
	cis, r := gis[0].GetComputeInstances(&ciProfile)
	if r != nvml.SUCCESS || len(cis) != 1 {
		t.Fatalf("compute instances %d %v", len(cis), r)
	}
	ciInfo, _ := cis[0].GetInfo()
	if ciInfo.GpuInstance != gis[0] || ciInfo.Id != 0 {
		t.Errorf("ci info %+v", ciInfo)
	}
	// Unmodelled instance calls answer NOT_SUPPORTED instead of panicking.
	if _, r := gis[0].GetActiveVgpus(); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetActiveVgpus: %v", r)
	}
	if r := cis[0].Destroy(); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("Destroy: %v", r)
	}
}

// TestH100MIGProfiles checks GPU 7 of dgx-h100 against the H100-SXM5-80GB
// profiles of NVIDIA's MIG user guide (`nvidia-smi mig -lgip`).
func TestH100MIGProfiles(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-h100", PinTime: pinAt(time.Minute), Privileged: true})
	d := handle(t, s, 7)
	if cur, _, r := d.GetMigMode(); r != nvml.SUCCESS || cur != nvml.DEVICE_MIG_ENABLE {
		t.Fatalf("gpu 7 MIG mode %d %v", cur, r)
	}
	for profile, want := range map[int]struct {
		id, instances, slices, sms uint32
		memMiB                     uint64
	}{
		nvml.GPU_INSTANCE_PROFILE_1_SLICE:      {19, 7, 1, 16, 9984},
		nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: {20, 1, 1, 16, 9984},
		nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: {15, 4, 1, 26, 20096},
		nvml.GPU_INSTANCE_PROFILE_2_SLICE:      {14, 3, 2, 32, 20096},
		nvml.GPU_INSTANCE_PROFILE_3_SLICE:      {9, 2, 3, 60, 40448},
		nvml.GPU_INSTANCE_PROFILE_4_SLICE:      {5, 1, 4, 64, 40448},
		nvml.GPU_INSTANCE_PROFILE_7_SLICE:      {0, 1, 7, 132, 81152},
	} {
		info, r := d.GetGpuInstanceProfileInfo(profile)
		if r != nvml.SUCCESS || info.Id != want.id || info.InstanceCount != want.instances ||
			info.SliceCount != want.slices || info.MultiprocessorCount != want.sms || info.MemorySizeMB != want.memMiB {
			t.Errorf("profile %d: %+v %v, want %+v", profile, info, r, want)
		}
	}
	// The layout: 3g.40gb (GI 1), 2g.20gb (GI 5), 1g.10gb (GI 13, 14).
	wantNames := []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}
	wantGIs := []int{1, 5, 13, 14}
	for j, name := range wantNames {
		m, r := d.GetMigDeviceHandleByIndex(j)
		if r != nvml.SUCCESS {
			t.Fatalf("GetMigDeviceHandleByIndex(%d): %v", j, r)
		}
		got, _ := m.GetName()
		gi, _ := m.GetGpuInstanceId()
		if got != "NVIDIA H100 80GB HBM3 MIG "+name || gi != wantGIs[j] {
			t.Errorf("MIG device %d = %q gi %d, want %s gi %d", j, got, gi, name, wantGIs[j])
		}
	}
	if _, r := d.GetMigDeviceHandleByIndex(4); r != nvml.ERROR_NOT_FOUND {
		t.Errorf("fifth MIG device: %v", r)
	}
	info, _ := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	gis, r := d.GetGpuInstances(&info)
	if r != nvml.SUCCESS || len(gis) != 1 {
		t.Fatalf("3g.40gb instances: %d %v", len(gis), r)
	}
	giInfo, _ := gis[0].GetInfo()
	if giInfo.Id != 1 || giInfo.ProfileId != 9 || giInfo.Placement != (nvml.GpuInstancePlacement{Start: 4, Size: 4}) {
		t.Errorf("3g.40gb instance %+v", giInfo)
	}
	ci, r := gis[0].GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if r != nvml.SUCCESS || ci.MultiprocessorCount != 16 || ci.InstanceCount != 3 {
		t.Errorf("1c.3g.40gb profile %+v %v", ci, r)
	}
	// The embedding service runs in the 3g.40gb instance, reported on its
	// MIG handle with the instance IDs; the parent lists it too.
	m, _ := d.GetMigDeviceHandleByIndex(0)
	procs, r := m.GetComputeRunningProcesses()
	if r != nvml.SUCCESS || len(procs) != 1 || procs[0].Pid != 95120 || procs[0].GpuInstanceId != 1 || procs[0].ComputeInstanceId != 0 {
		t.Errorf("3g.40gb processes %+v %v", procs, r)
	}
	if mem, _ := m.GetMemoryInfo_v2(); mem.Total != 40448*mib || mem.Used != 27*gib {
		t.Errorf("3g.40gb memory %+v", mem)
	}
	if idle, _ := d.GetMigDeviceHandleByIndex(1); idle != nil {
		if procs, _ := idle.GetComputeRunningProcesses(); len(procs) != 0 {
			t.Errorf("idle 2g.20gb has processes %+v", procs)
		}
	}
	// The other GPUs of the DGX stay out of MIG mode.
	for i := range 7 {
		if cur, _, _ := handle(t, s, i).GetMigMode(); cur != nvml.DEVICE_MIG_DISABLE {
			t.Errorf("gpu %d in MIG mode", i)
		}
	}
}

func TestGPM(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-h100", PinTime: pinAt(time.Minute)})
	d := handle(t, s, 0)
	if sup, r := s.GpmQueryDeviceSupport(d); r != nvml.SUCCESS || sup.IsSupportedDevice != 1 {
		t.Fatalf("GpmQueryDeviceSupport %+v %v", sup, r)
	}
	s1, _ := s.GpmSampleAlloc()
	s2, _ := s.GpmSampleAlloc()
	if r := s.GpmSampleGet(d, s1); r != nvml.SUCCESS {
		t.Fatal(r)
	}
	s.SetElapsed(2 * time.Minute)
	if r := d.GpmSampleGet(s2); r != nvml.SUCCESS {
		t.Fatal(r)
	}
	ids := []nvml.GpmMetricId{nvml.GPM_METRIC_SM_UTIL, nvml.GPM_METRIC_SM_OCCUPANCY, nvml.GPM_METRIC_ANY_TENSOR_UTIL,
		nvml.GPM_METRIC_DRAM_BW_UTIL, nvml.GPM_METRIC_FP16_UTIL, nvml.GPM_METRIC_FP32_UTIL, nvml.GPM_METRIC_FP64_UTIL,
		nvml.GPM_METRIC_NVDEC_0_UTIL}
	mg := &nvml.GpmMetricsGetType{NumMetrics: uint32(len(ids)), Sample1: s1, Sample2: s2}
	for i, id := range ids {
		mg.Metrics[i].MetricId = uint32(id)
	}
	if r := s.GpmMetricsGet(mg); r != nvml.SUCCESS {
		t.Fatal(r)
	}
	for i, id := range ids[:7] {
		m := mg.Metrics[i]
		if nvml.Return(m.NvmlReturn) != nvml.SUCCESS || m.Value <= 0 || m.Value > 100 {
			t.Errorf("metric %d: %v %v", id, m.Value, nvml.Return(m.NvmlReturn))
		}
	}
	if nvml.Return(mg.Metrics[7].NvmlReturn) != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("unmodelled metric: %v", nvml.Return(mg.Metrics[7].NvmlReturn))
	}
	// SM util over the interval lies between the utilization readings.
	sm := mg.Metrics[0].Value
	lo, hi := 100.0, 0.0
	for sec := 60; sec <= 120; sec++ {
		s.SetElapsed(time.Duration(sec) * time.Second)
		u, _ := d.GetUtilizationRates()
		lo, hi = min(lo, float64(u.Gpu)), max(hi, float64(u.Gpu))
	}
	if sm < lo-1 || sm > hi+1 {
		t.Errorf("GPM SM util %.1f outside utilization readings [%v, %v]", sm, lo, hi)
	}
	// GPU 7 is in MIG mode: GPM per GPU instance. The 3g.40gb instance
	// (GI 1) runs a service; the 2g.20gb (GI 5) is idle and reads 0.
	mig := handle(t, s, 7)
	for gi, busy := range map[int]bool{1: true, 5: false, 13: false} {
		s.SetElapsed(time.Minute)
		if r := s.GpmMigSampleGet(mig, gi, s1); r != nvml.SUCCESS {
			t.Fatalf("GpmMigSampleGet(gi %d): %v", gi, r)
		}
		s.SetElapsed(2 * time.Minute)
		if r := mig.GpmMigSampleGet(gi, s2); r != nvml.SUCCESS {
			t.Fatalf("GpmMigSampleGet(gi %d): %v", gi, r)
		}
		if r := s.GpmMetricsGet(mg); r != nvml.SUCCESS {
			t.Fatalf("GpmMetricsGet(gi %d): %v", gi, r)
		}
		if sm := mg.Metrics[0].Value; (sm > 0) != busy || sm > 100 {
			t.Errorf("gpu 7 gi %d SM util %v, busy %v", gi, sm, busy)
		}
	}
	// A GPU instance that does not exist, and a MIG sample on a GPU
	// without MIG.
	if r := s.GpmMigSampleGet(mig, 2, s1); r != nvml.ERROR_NOT_FOUND {
		t.Errorf("GpmMigSampleGet(missing gi): %v", r)
	}
	if r := s.GpmMigSampleGet(d, 1, s1); r != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("GpmMigSampleGet on a non-MIG GPU: %v", r)
	}
	// Samples of one GPU instance and of another cannot be compared.
	s.GpmMigSampleGet(mig, 1, s1)
	s.GpmMigSampleGet(mig, 5, s2)
	if r := s.GpmMetricsGet(mg); r != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("mixed GPU instances: %v", r)
	}
	// Samples of different devices cannot be compared.
	s.GpmSampleGet(d, s1)
	if r := s.GpmMetricsGet(mg); r != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("mixed devices: %v", r)
	}
	// No GPM on Ampere.
	a100 := handle(t, newSim(t, Config{Profile: "dgx-a100-mig"}), 5)
	if sup, _ := a100.GpmQueryDeviceSupport(); sup.IsSupportedDevice != 0 {
		t.Errorf("A100 GPM supported")
	}
}

func TestProcessUtilization(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", PinTime: pinAt(time.Minute)})
	d := handle(t, s, 0)
	samples, r := d.GetProcessUtilization(0)
	// One sample per process: its mean over the buffered periods, stamped
	// with the newest period's time.
	now := uint64(s.Now().UnixMicro())
	if r != nvml.SUCCESS || len(samples) != 1 {
		t.Fatalf("samples %+v %v", samples, r)
	}
	if x := samples[0]; x.Pid != 48213 || x.SmUtil != 72 || x.MemUtil != 41 || x.TimeStamp > now || x.TimeStamp < now-uint64(processSamplePeriod.Microseconds()) {
		t.Fatalf("sample %+v (now %d)", x, now)
	}
	// Nothing newer than the last seen sample: NOT_FOUND, as NVML.
	if _, r := d.GetProcessUtilization(samples[0].TimeStamp); r != nvml.ERROR_NOT_FOUND {
		t.Errorf("no new samples: %v", r)
	}
	s.SetElapsed(2 * time.Minute)
	if _, r := d.GetProcessUtilization(samples[0].TimeStamp); r != nvml.SUCCESS {
		t.Errorf("new samples: %v", r)
	}
	procs, _ := d.GetComputeRunningProcesses()
	if len(procs) != 1 || procs[0].UsedGpuMemory != 61<<30 || procs[0].GpuInstanceId != 0xFFFFFFFF {
		t.Errorf("processes %+v", procs)
	}
	mem, _ := d.GetMemoryInfo_v2()
	if mem.Used != 61<<30 || mem.Reserved != 591*mib || mem.Total != mem.Used+mem.Reserved+mem.Free {
		t.Errorf("memory v2 %+v", mem)
	}
	v1, _ := d.GetMemoryInfo()
	if v1.Used != mem.Used+mem.Reserved {
		t.Errorf("memory v1 used %d should include the reservation", v1.Used)
	}
}

// TestMIGPrivileges: what nvml.h reserves to privileged callers (a MIG
// GPU's own process lists, its GPU instance objects) answers NO_PERMISSION
// unless the simulated caller is privileged; the MIG devices answer both.
func TestMIGPrivileges(t *testing.T) {
	for _, privileged := range []bool{false, true} {
		s := newSim(t, Config{Profile: "dgx-h100", Privileged: privileged})
		d := handle(t, s, 7)
		want := nvml.ERROR_NO_PERMISSION
		if privileged {
			want = nvml.SUCCESS
		}
		info, _ := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
		if _, r := d.GetGpuInstances(&info); r != want {
			t.Errorf("privileged %v: GetGpuInstances %v, want %v", privileged, r, want)
		}
		gi, r := d.GetGpuInstanceById(1)
		if r != want {
			t.Errorf("privileged %v: GetGpuInstanceById %v, want %v", privileged, r, want)
		}
		if privileged {
			if gii, r := gi.GetInfo(); r != nvml.SUCCESS || gii.ProfileId != 9 || gii.Placement.Start != 4 || gii.Placement.Size != 4 {
				t.Errorf("GPU instance 1 info %+v %v, want 3g.40gb (9) at 4 of size 4", gii, r)
			}
		}
		procs, r := d.GetComputeRunningProcesses()
		if r != want || (privileged && (len(procs) != 1 || procs[0].GpuInstanceId != 1 || procs[0].ComputeInstanceId != 0)) {
			t.Errorf("privileged %v: parent process list %+v %v, want %v", privileged, procs, r, want)
		}
		m, _ := d.GetMigDeviceHandleByIndex(0)
		if procs, r := m.GetComputeRunningProcesses(); r != nvml.SUCCESS || len(procs) != 1 {
			t.Errorf("privileged %v: MIG device process list %+v %v", privileged, procs, r)
		}
	}
}

// With process_samples: every_period the query answers the driver's
// buffer: a sample every 1/6 s over the last 10 s, newest first, each
// stamped with the past time it was taken.
func TestProcessUtilizationEveryPeriod(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", PinTime: pinAt(time.Minute), ProcessSamples: ProcessSamplesEveryPeriod})
	d := handle(t, s, 0)
	samples, r := d.GetProcessUtilization(0)
	now := uint64(s.Now().UnixMicro())
	if r != nvml.SUCCESS || len(samples) < 59 || len(samples) > 61 {
		t.Fatalf("samples %+v %v", samples, r)
	}
	for i, x := range samples {
		if x.Pid != 48213 || x.SmUtil != 72 || x.MemUtil != 41 || x.TimeStamp > now || x.TimeStamp < now-10.2e6 ||
			(i > 0 && x.TimeStamp >= samples[i-1].TimeStamp) {
			t.Fatalf("sample %d = %+v (now %d)", i, x, now)
		}
	}
	if _, r := d.GetProcessUtilization(samples[0].TimeStamp); r != nvml.ERROR_NOT_FOUND {
		t.Errorf("no new samples: %v", r)
	}
}

// A per-process sample is the mean over every period since the last
// seen time, those before the process started counting as idle: the
// sample times the time since the last read is the process's SM time.
func TestPerProcessSampleIsTheMeanSinceLastSeen(t *testing.T) {
	start := Duration(10*time.Second + 500*time.Millisecond)
	s := newSim(t, Config{Profile: "h100", PinTime: pinAt(10 * time.Second), Processes: []ProcessSpec{
		{GPU: 0, PID: 7, SMUtilization: 0.6, MemoryUtilization: 0.3, Start: &start},
	}})
	d := handle(t, s, 0)
	if _, r := d.GetProcessUtilization(0); r != nvml.ERROR_NOT_FOUND {
		t.Fatalf("before the start: %v", r)
	}
	lastSeen := uint64(s.Now().UnixMicro())
	s.SetElapsed(11 * time.Second)
	samples, r := d.GetProcessUtilization(lastSeen)
	if r != nvml.SUCCESS || len(samples) != 1 {
		t.Fatalf("samples %+v %v", samples, r)
	}
	// Busy 0.5 s of the 1 s since the last read, at 60 %: 30 %.
	if x := samples[0]; x.Pid != 7 || x.SmUtil != 30 || x.MemUtil != 15 || x.TimeStamp != uint64(Epoch.Add((11*time.Second).Truncate(processSamplePeriod)).UnixMicro()) {
		t.Errorf("sample %+v", x)
	}
	// Past the buffer, the mean is over the buffer's 10 s.
	s.SetElapsed(30 * time.Second)
	samples, _ = d.GetProcessUtilization(samples[0].TimeStamp)
	if len(samples) != 1 || samples[0].SmUtil != 60 {
		t.Errorf("after 19 s: %+v", samples)
	}
}
