package kubeapi

// The kubelet's pod-resources API, v1 (k8s.io/kubelet/pkg/apis/podresources/v1).

// MethodList is PodResourcesLister.List; its request is empty.
const MethodList = "/v1.PodResourcesLister/List"

// PodResources is a pod and what its containers hold.
type PodResources struct {
	Name       string               // 1
	Namespace  string               // 2
	Containers []ContainerResources // 3
}

// ContainerResources is what one container holds.
type ContainerResources struct {
	Name             string             // 1
	Devices          []ContainerDevices // 2: device plugins' devices
	DynamicResources []DynamicResource  // 5: DRA claims' devices
}

// ContainerDevices are the devices of one extended resource.
type ContainerDevices struct {
	ResourceName string   // 1
	DeviceIDs    []string // 2
}

// DynamicResource is one resource claim of a container.
type DynamicResource struct {
	ClaimName      string          // 2
	ClaimNamespace string          // 3
	ClaimResources []ClaimResource // 4
}

// ClaimResource is one device allocated to a claim.
type ClaimResource struct {
	CDIDevices []string // 1: CDIDevice.name (1)
	DriverName string   // 2
	PoolName   string   // 3
	DeviceName string   // 4
}

// DecodeListPodResourcesResponse decodes List's answer.
func DecodeListPodResourcesResponse(b []byte) ([]PodResources, error) {
	var out []PodResources
	err := eachField(b, func(fd field) error {
		if fd.num == 1 {
			return decodeMessages(fd, &out, decodePodResources)
		}
		return nil
	})
	return out, wrap("ListPodResourcesResponse", err)
}

func decodePodResources(b []byte) (p PodResources, err error) {
	err = eachField(b, func(fd field) error {
		switch fd.num {
		case 1:
			p.Name = string(fd.bytes)
		case 2:
			p.Namespace = string(fd.bytes)
		case 3:
			return decodeMessages(fd, &p.Containers, decodeContainerResources)
		}
		return nil
	})
	return p, err
}

func decodeContainerResources(b []byte) (c ContainerResources, err error) {
	err = eachField(b, func(fd field) error {
		switch fd.num {
		case 1:
			c.Name = string(fd.bytes)
		case 2:
			return decodeMessages(fd, &c.Devices, decodeContainerDevices)
		case 5:
			return decodeMessages(fd, &c.DynamicResources, decodeDynamicResource)
		}
		return nil
	})
	return c, err
}

func decodeContainerDevices(b []byte) (d ContainerDevices, err error) {
	err = eachField(b, func(fd field) error {
		switch fd.num {
		case 1:
			d.ResourceName = string(fd.bytes)
		case 2:
			d.DeviceIDs = append(d.DeviceIDs, string(fd.bytes))
		}
		return nil
	})
	return d, err
}

func decodeDynamicResource(b []byte) (d DynamicResource, err error) {
	err = eachField(b, func(fd field) error {
		switch fd.num {
		case 2:
			d.ClaimName = string(fd.bytes)
		case 3:
			d.ClaimNamespace = string(fd.bytes)
		case 4:
			return decodeMessages(fd, &d.ClaimResources, decodeClaimResource)
		}
		return nil
	})
	return d, err
}

func decodeClaimResource(b []byte) (c ClaimResource, err error) {
	err = eachField(b, func(fd field) error {
		switch fd.num {
		case 1:
			return eachField(fd.bytes, func(cdi field) error {
				if cdi.num == 1 {
					c.CDIDevices = append(c.CDIDevices, string(cdi.bytes))
				}
				return nil
			})
		case 2:
			c.DriverName = string(fd.bytes)
		case 3:
			c.PoolName = string(fd.bytes)
		case 4:
			c.DeviceName = string(fd.bytes)
		}
		return nil
	})
	return c, err
}

// EncodeListPodResourcesResponse encodes List's answer (the demo's kubelet
// serves it).
func EncodeListPodResourcesResponse(pods []PodResources) []byte {
	var b []byte
	for _, p := range pods {
		var pb []byte
		pb = appendString(pb, 1, p.Name)
		pb = appendString(pb, 2, p.Namespace)
		for _, c := range p.Containers {
			pb = appendMessage(pb, 3, encodeContainerResources(c))
		}
		b = appendMessage(b, 1, pb)
	}
	return b
}

func encodeContainerResources(c ContainerResources) []byte {
	var b []byte
	b = appendString(b, 1, c.Name)
	for _, d := range c.Devices {
		var db []byte
		db = appendString(db, 1, d.ResourceName)
		for _, id := range d.DeviceIDs {
			db = appendMessage(db, 2, []byte(id))
		}
		b = appendMessage(b, 2, db)
	}
	for _, d := range c.DynamicResources {
		var db []byte
		db = appendString(db, 2, d.ClaimName)
		db = appendString(db, 3, d.ClaimNamespace)
		for _, r := range d.ClaimResources {
			var rb []byte
			for _, cdi := range r.CDIDevices {
				rb = appendMessage(rb, 1, appendString(nil, 1, cdi))
			}
			rb = appendString(rb, 2, r.DriverName)
			rb = appendString(rb, 3, r.PoolName)
			rb = appendString(rb, 4, r.DeviceName)
			db = appendMessage(db, 4, rb)
		}
		b = appendMessage(b, 5, db)
	}
	return b
}
