package snapshot

import "testing"

// Same is true for the devices of the last Set, whatever their readings,
// and false when anything that names a GPU or MIG instance differs.
func TestDeviceIdentities(t *testing.T) {
	devices := func() []Device {
		return []Device{
			{Index: 0, UUID: "GPU-a", Info: Info{MinorNumber: Some(0)}},
			{Index: 1, UUID: "GPU-b", Info: Info{MinorNumber: Some(1)}, MIGInstances: []MIGInstance{
				{GPUInstanceID: 1, ComputeInstanceID: 0, UUID: "MIG-1", Profile: "1g.10gb", GPUInstanceProfileID: Some(19), PlacementStart: Some(0), PlacementSize: Some(1)},
				{GPUInstanceID: 2, ComputeInstanceID: 0, UUID: "MIG-2", Profile: "3g.40gb"},
			}},
		}
	}
	var ids DeviceIdentities
	if ids.Same(nil) || ids.Same(devices()) {
		t.Fatal("the zero value matched devices")
	}
	ids.Set(devices())
	same := devices()
	same[0].Temperature.GPU = Some(61.0)
	same[1].MIGInstances[0].MemoryUsed = Some(uint64(1 << 30))
	same[1].MIGInstances[1].GPM.SMActive = Some(0.5)
	if !ids.Same(same) {
		t.Error("readings changed the identity")
	}
	for name, change := range map[string]func([]Device) []Device{
		"index":            func(d []Device) []Device { d[0].Index = 2; return d },
		"UUID":             func(d []Device) []Device { d[1].UUID = "GPU-c"; return d },
		"minor number":     func(d []Device) []Device { d[0].Info.MinorNumber = Opt[int]{}; return d },
		"fewer GPUs":       func(d []Device) []Device { return d[:1] },
		"MIG UUID":         func(d []Device) []Device { d[1].MIGInstances[1].UUID = "MIG-3"; return d },
		"MIG profile":      func(d []Device) []Device { d[1].MIGInstances[1].Profile = "2g.20gb"; return d },
		"MIG placement":    func(d []Device) []Device { d[1].MIGInstances[0].PlacementStart = Some(4); return d },
		"MIG profile ID":   func(d []Device) []Device { d[1].MIGInstances[0].GPUInstanceProfileID = Some(14); return d },
		"MIG instance IDs": func(d []Device) []Device { d[1].MIGInstances[1].ComputeInstanceID = 1; return d },
		"MIG gone":         func(d []Device) []Device { d[1].MIGInstances = d[1].MIGInstances[:1]; return d },
	} {
		if ids.Same(change(devices())) {
			t.Errorf("%s changed: still the same", name)
		}
	}
}
