package snapshot

// DeviceIdentities keeps what names a snapshot's GPUs and their MIG
// instances (index, UUID, minor number; each instance's IDs, UUID, profile
// and placement), to tell whether a later snapshot's devices are the same
// ones without keeping the snapshot. Matching an allocation to its GPU or
// MIG instance reads nothing else, so a match can be kept while they
// stand (the allocation sources' cached answers, at every accounting
// tick). The zero value matches no devices.
type DeviceIdentities struct {
	set  bool
	devs []deviceIdentity
}

type deviceIdentity struct {
	index int
	uuid  string
	minor Opt[int]
	migs  []migIdentity
}

type migIdentity struct {
	gpuInstance, computeInstance int
	uuid, profile                string
	profileID, start, size       Opt[int]
}

func migIdentityOf(m *MIGInstance) migIdentity {
	return migIdentity{m.GPUInstanceID, m.ComputeInstanceID, m.UUID, m.Profile,
		m.GPUInstanceProfileID, m.PlacementStart, m.PlacementSize}
}

// Same says whether devices are named as the devices of the last Set.
func (ids *DeviceIdentities) Same(devices []Device) bool {
	if !ids.set || len(devices) != len(ids.devs) {
		return false
	}
	for i := range devices {
		d, id := &devices[i], &ids.devs[i]
		if d.Index != id.index || d.UUID != id.uuid || d.Info.MinorNumber != id.minor || len(d.MIGInstances) != len(id.migs) {
			return false
		}
		for j := range d.MIGInstances {
			if migIdentityOf(&d.MIGInstances[j]) != id.migs[j] {
				return false
			}
		}
	}
	return true
}

// Set keeps the identities of devices.
func (ids *DeviceIdentities) Set(devices []Device) {
	ids.set = true
	ids.devs = ids.devs[:0]
	for i := range devices {
		d := &devices[i]
		id := deviceIdentity{index: d.Index, uuid: d.UUID, minor: d.Info.MinorNumber}
		for j := range d.MIGInstances {
			id.migs = append(id.migs, migIdentityOf(&d.MIGInstances[j]))
		}
		ids.devs = append(ids.devs, id)
	}
}
