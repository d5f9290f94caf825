package attribution

import (
	"strconv"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/kubeapi"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Kubernetes Dynamic Resource Allocation (DRA). The kubelet's pod-resources
// List names, per container, the devices of its resource claims
// (ContainerResources.dynamic_resources): driver, pool and device name, as
// the driver published them in its ResourceSlice. NVIDIA's DRA driver for
// GPUs (github.com/NVIDIA/k8s-dra-driver-gpu, now
// sigs.k8s.io/dra-driver-nvidia-gpu) builds its device names from facts NVML
// also gives us, so a device is found without the API server, without RBAC
// and without reading the driver's ResourceSlices:
//
//	gpu-<minor>                                       whole GPU, by /dev/nvidia<minor>
//	gpu-<minor>-mig-<giProfileID>-<start>-<size>      MIG device, v25.3.0 to v25.8.x
//	gpu-<minor>-mig-<profile>-<giProfileID>-<start>   MIG device, v25.12.0 and later
//
// <profile> is the MIG profile name without dots, lower case, other
// characters than [a-z0-9-] turned into '-' ("1g.10gb+me" → "1g10gb-me");
// <giProfileID> is the GPU instance profile ID (nvidia-smi mig -lgip) and
// <start>/<size> the GPU instance's placement. Releases before v25.3.0
// (up to v25.3.0-rc.4) numbered "gpu-N" by NVML index instead of minor
// number; a name cannot tell which, so those are not supported.

// nvidiaDRADriver is the driver name of NVIDIA's DRA driver for GPUs.
const nvidiaDRADriver = "gpu.nvidia.com"

// draGPUAllocations appends the devices of NVIDIA's DRA driver that
// container c of pod pr holds through its resource claims. A claim shared
// by several pods (or containers) appears under each of them.
func draGPUAllocations(out []PodAllocation, pr *kubeapi.PodResources, c *kubeapi.ContainerResources, add func(PodAllocation) bool) []PodAllocation {
	for _, dr := range c.DynamicResources {
		for _, cr := range dr.ClaimResources {
			if cr.DriverName != nvidiaDRADriver || cr.DeviceName == "" {
				continue
			}
			a := PodAllocation{
				DeviceID: cr.DeviceName,
				Driver:   cr.DriverName,
				Pool:     cr.PoolName,
				Claim:    dr.ClaimNamespace + "/" + dr.ClaimName,
				Pod:      snapshot.Pod{Name: pr.Name, Namespace: pr.Namespace, Container: c.Name},
			}
			if add(a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// draDeviceName is a device name of NVIDIA's DRA driver, parsed.
type draDeviceName struct {
	minor int
	mig   bool
	// For a MIG device: the GPU instance's profile ID and placement
	// start; size only in the v25.3–v25.8 form (-1 otherwise), profile
	// only in the v25.12+ form ("" otherwise).
	profileID, start, size int
	profile                string
}

// parseDRADeviceName parses a device name of NVIDIA's DRA driver; ok is
// false for names that are no GPU or MIG device NVML shows (the driver's
// "gpu-vfio-N" passthrough devices, other drivers' names).
func parseDRADeviceName(name string) (d draDeviceName, ok bool) {
	rest, found := strings.CutPrefix(name, "gpu-")
	if !found {
		return d, false
	}
	minor, mig, isMIG := strings.Cut(rest, "-mig-")
	if d.minor, ok = atoiStrict(minor); !ok {
		return d, false
	}
	if !isMIG {
		return d, true
	}
	d.mig = true
	parts := strings.Split(mig, "-")
	if len(parts) < 3 {
		return d, false
	}
	secondLast, ok1 := atoiStrict(parts[len(parts)-2])
	last, ok2 := atoiStrict(parts[len(parts)-1])
	if !ok1 || !ok2 {
		return d, false
	}
	if first, isNum := atoiStrict(parts[0]); isNum && len(parts) == 3 {
		// v25.3–v25.8: <giProfileID>-<start>-<size>. A profile name
		// is never all digits, so this cannot be the v25.12+ form.
		d.profileID, d.start, d.size = first, secondLast, last
		return d, true
	}
	// v25.12+: <profile>-<giProfileID>-<start>.
	d.profileID, d.start, d.size = secondLast, last, -1
	d.profile = strings.Join(parts[:len(parts)-2], "-")
	return d, d.profile != ""
}

// atoiStrict parses a non-negative decimal number without sign or spaces.
func atoiStrict(s string) (int, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// draProfileName is a MIG profile name ("1g.10gb+me", as NVML names the
// MIG device) the way NVIDIA's DRA driver writes it in device names
// ("1g10gb-me").
func draProfileName(profile string) string {
	s := strings.ToLower(strings.ReplaceAll(profile, ".", ""))
	s = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, s)
	return strings.Trim(s, "-")
}

// draMIGInstances finds the MIG instances of dev that the driver's device
// name n stands for. The device is a GPU instance; it normally holds one
// compute instance, and all of them are returned otherwise.
//
// Placement (profile ID and start slice) identifies a GPU instance; NVML
// tells it only to root or a holder of the MIG monitor capability. Without
// it, a profile name (v25.12+ names) that only one instance of dev has
// still identifies it; otherwise nil: the caller then attributes the parent
// GPU, which is right, without saying which instance.
func draMIGInstances(dev *snapshot.Device, n draDeviceName) []snapshot.MIGInstance {
	var byPlacement, byProfile []snapshot.MIGInstance
	placementsKnown := false
	for _, m := range dev.MIGInstances {
		if m.GPUInstanceProfileID.Valid && m.PlacementStart.Valid {
			placementsKnown = true
			if m.GPUInstanceProfileID.Value == n.profileID && m.PlacementStart.Value == n.start &&
				(n.size < 0 || (m.PlacementSize.Valid && m.PlacementSize.Value == n.size)) {
				byPlacement = append(byPlacement, m)
			}
		}
		if n.profile != "" && draProfileName(m.Profile) == n.profile {
			byProfile = append(byProfile, m)
		}
	}
	if placementsKnown {
		if len(byPlacement) > 1 && n.profile != "" {
			// Several compute instances in the GPU instance: the
			// name's profile says which (1c.3g.40gb vs 3g.40gb).
			var named []snapshot.MIGInstance
			for _, m := range byPlacement {
				if draProfileName(m.Profile) == n.profile {
					named = append(named, m)
				}
			}
			if len(named) > 0 {
				return named
			}
		}
		return byPlacement
	}
	if len(byProfile) == 1 {
		return byProfile
	}
	return nil
}
