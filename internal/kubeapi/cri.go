package kubeapi

import (
	"maps"
	"slices"
)

// The CRI runtime service, v1 (k8s.io/cri-api/pkg/apis/runtime/v1).

// CRI methods gpuwatch calls.
const (
	MethodContainerStatus = "/runtime.v1.RuntimeService/ContainerStatus"
	MethodVersion         = "/runtime.v1.RuntimeService/Version"
)

// ContainerStateRunning is ContainerState CONTAINER_RUNNING.
const ContainerStateRunning = 1

// ContainerStatus is the part of a container's status gpuwatch reads.
type ContainerStatus struct {
	ID                 string            // 1
	Name               string            // 2: metadata (ContainerMetadata.name, 1)
	State              int32             // 3
	Image              string            // 8: image (ImageSpec.image, 1)
	UserSpecifiedImage string            // 8: image (ImageSpec.user_specified_image, 18)
	ImageRef           string            // 9
	Labels             map[string]string // 12
}

// EncodeContainerStatusRequest asks, non-verbose, for one container.
func EncodeContainerStatusRequest(containerID string) []byte {
	return appendString(nil, 1, containerID)
}

// DecodeContainerStatusRequest is the container ID a request asks for.
func DecodeContainerStatusRequest(b []byte) (containerID string, err error) {
	err = eachField(b, func(fd field) error {
		if fd.num == 1 {
			containerID = string(fd.bytes)
		}
		return nil
	})
	return containerID, wrap("ContainerStatusRequest", err)
}

// DecodeContainerStatusResponse decodes the answer; ok is false when it
// holds no status.
func DecodeContainerStatusResponse(b []byte) (st ContainerStatus, ok bool, err error) {
	err = eachField(b, func(fd field) error {
		if fd.num != 1 {
			return nil
		}
		ok = true
		return eachField(fd.bytes, func(fd field) error {
			switch fd.num {
			case 1:
				st.ID = string(fd.bytes)
			case 2:
				return eachField(fd.bytes, func(md field) error {
					if md.num == 1 {
						st.Name = string(md.bytes)
					}
					return nil
				})
			case 3:
				st.State = int32(fd.varint)
			case 8:
				return eachField(fd.bytes, func(img field) error {
					switch img.num {
					case 1:
						st.Image = string(img.bytes)
					case 18:
						st.UserSpecifiedImage = string(img.bytes)
					}
					return nil
				})
			case 9:
				st.ImageRef = string(fd.bytes)
			case 12:
				k, v, err := stringMapEntry(fd.bytes)
				if err != nil {
					return err
				}
				if st.Labels == nil {
					st.Labels = map[string]string{}
				}
				st.Labels[k] = v
			}
			return nil
		})
	})
	return st, ok, wrap("ContainerStatusResponse", err)
}

// EncodeContainerStatusResponse encodes an answer (the demo's runtime
// serves it).
func EncodeContainerStatusResponse(st ContainerStatus) []byte {
	var sb []byte
	sb = appendString(sb, 1, st.ID)
	sb = appendMessage(sb, 2, appendString(nil, 1, st.Name))
	sb = appendVarint(sb, 3, uint64(st.State))
	var img []byte
	img = appendString(img, 1, st.Image)
	img = appendString(img, 18, st.UserSpecifiedImage)
	sb = appendMessage(sb, 8, img)
	sb = appendString(sb, 9, st.ImageRef)
	sb = appendStringMap(sb, 12, st.Labels, slices.Sorted(maps.Keys(st.Labels)))
	return appendMessage(nil, 1, sb)
}

// Version is the runtime's VersionResponse.
type Version struct {
	Version           string // 1
	RuntimeName       string // 2
	RuntimeVersion    string // 3
	RuntimeAPIVersion string // 4
}

// EncodeVersionRequest asks for the runtime's version, naming the CRI
// version the client speaks.
func EncodeVersionRequest(version string) []byte { return appendString(nil, 1, version) }

// DecodeVersion decodes a VersionResponse.
func DecodeVersion(b []byte) (v Version, err error) {
	err = eachField(b, func(fd field) error {
		switch fd.num {
		case 1:
			v.Version = string(fd.bytes)
		case 2:
			v.RuntimeName = string(fd.bytes)
		case 3:
			v.RuntimeVersion = string(fd.bytes)
		case 4:
			v.RuntimeAPIVersion = string(fd.bytes)
		}
		return nil
	})
	return v, wrap("VersionResponse", err)
}

// EncodeVersion encodes a VersionResponse.
func EncodeVersion(v Version) []byte {
	var b []byte
	b = appendString(b, 1, v.Version)
	b = appendString(b, 2, v.RuntimeName)
	b = appendString(b, 3, v.RuntimeVersion)
	return appendString(b, 4, v.RuntimeAPIVersion)
}
