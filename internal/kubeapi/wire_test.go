package kubeapi

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimev1 "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// A List answer as a kubelet marshals it, with the fields gpuwatch skips
// (topology, CPU IDs, memory) around the ones it reads.
func realListResponse() *podresourcesv1.ListPodResourcesResponse {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		{Name: "trainer", Namespace: "ml", Containers: []*podresourcesv1.ContainerResources{{
			Name:   "main",
			CpuIds: []int64{1, 2, 3},
			Memory: []*podresourcesv1.ContainerMemory{{MemoryType: "memory", Size: 1 << 30}},
			Devices: []*podresourcesv1.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a", "GPU-b"},
					Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: 1}}}},
				{ResourceName: "example.com/nic", DeviceIds: []string{"nic0"}},
			},
			DynamicResources: []*podresourcesv1.DynamicResource{{
				ClaimName: "gpu", ClaimNamespace: "ml",
				ClaimResources: []*podresourcesv1.ClaimResource{{
					DriverName: "gpu.nvidia.com", PoolName: "node-1", DeviceName: "gpu-0",
					CdiDevices: []*podresourcesv1.CDIDevice{{Name: "k8s.gpu.nvidia.com/claim=x"}},
				}},
			}},
		}, {Name: "sidecar"}}},
		{Name: "idle", Namespace: "default"},
	}}
}

var wantPods = []PodResources{
	{Name: "trainer", Namespace: "ml", Containers: []ContainerResources{{
		Name: "main",
		Devices: []ContainerDevices{
			{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{"GPU-a", "GPU-b"}},
			{ResourceName: "example.com/nic", DeviceIDs: []string{"nic0"}},
		},
		DynamicResources: []DynamicResource{{
			ClaimName: "gpu", ClaimNamespace: "ml",
			ClaimResources: []ClaimResource{{
				DriverName: "gpu.nvidia.com", PoolName: "node-1", DeviceName: "gpu-0",
				CDIDevices: []string{"k8s.gpu.nvidia.com/claim=x"},
			}},
		}},
	}, {Name: "sidecar"}}},
	{Name: "idle", Namespace: "default"},
}

func TestDecodeListFromTheGeneratedPackage(t *testing.T) {
	b, err := proto.Marshal(realListResponse())
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeListPodResourcesResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantPods) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, wantPods)
	}
}

func TestEncodeListReadsBackInTheGeneratedPackage(t *testing.T) {
	var got podresourcesv1.ListPodResourcesResponse
	if err := proto.Unmarshal(EncodeListPodResourcesResponse(wantPods), &got); err != nil {
		t.Fatal(err)
	}
	want := realListResponse()
	// What the encoder does not write.
	c := want.PodResources[0].Containers[0]
	c.CpuIds, c.Memory, c.Devices[0].Topology = nil, nil, nil
	if !proto.Equal(&got, want) {
		t.Errorf("read back\n%v\nwant\n%v", &got, want)
	}
}

func realStatusResponse() *runtimev1.ContainerStatusResponse {
	return &runtimev1.ContainerStatusResponse{
		Status: &runtimev1.ContainerStatus{
			Id:        "abc",
			Metadata:  &runtimev1.ContainerMetadata{Name: "main", Attempt: 3},
			State:     runtimev1.ContainerState_CONTAINER_RUNNING,
			CreatedAt: 1700000000,
			ExitCode:  -1,
			Image:     &runtimev1.ImageSpec{Image: "sha256:1", UserSpecifiedImage: "nvcr.io/pytorch:24.01", Annotations: map[string]string{"a": "b"}},
			ImageRef:  "sha256:1",
			Labels: map[string]string{
				"io.kubernetes.pod.name": "trainer", "io.kubernetes.pod.namespace": "ml", "empty": "",
			},
			Annotations: map[string]string{"x": "y"},
			Mounts:      []*runtimev1.Mount{{ContainerPath: "/data", HostPath: "/srv"}},
			LogPath:     "/var/log/pods/x",
		},
		Info: map[string]string{"info": "{}"},
	}
}

var wantStatus = ContainerStatus{
	ID: "abc", Name: "main", State: ContainerStateRunning, Image: "sha256:1",
	UserSpecifiedImage: "nvcr.io/pytorch:24.01", ImageRef: "sha256:1",
	Labels: map[string]string{"io.kubernetes.pod.name": "trainer", "io.kubernetes.pod.namespace": "ml", "empty": ""},
}

func TestDecodeContainerStatusFromTheGeneratedPackage(t *testing.T) {
	b, err := proto.Marshal(realStatusResponse())
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := DecodeContainerStatusResponse(b)
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	if !reflect.DeepEqual(got, wantStatus) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, wantStatus)
	}
	empty, err := proto.Marshal(&runtimev1.ContainerStatusResponse{Info: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := DecodeContainerStatusResponse(empty); ok || err != nil {
		t.Errorf("an answer without status: ok %v, err %v; want false, nil", ok, err)
	}
}

func TestEncodeContainerStatusReadsBackInTheGeneratedPackage(t *testing.T) {
	var got runtimev1.ContainerStatusResponse
	if err := proto.Unmarshal(EncodeContainerStatusResponse(wantStatus), &got); err != nil {
		t.Fatal(err)
	}
	st := got.GetStatus()
	if st.GetId() != "abc" || st.GetMetadata().GetName() != "main" || st.GetState() != runtimev1.ContainerState_CONTAINER_RUNNING ||
		st.GetImage().GetImage() != "sha256:1" || st.GetImage().GetUserSpecifiedImage() != "nvcr.io/pytorch:24.01" ||
		st.GetImageRef() != "sha256:1" || !reflect.DeepEqual(st.GetLabels(), wantStatus.Labels) {
		t.Errorf("read back %v", st)
	}
}

func TestRequestsAndVersionAgainstTheGeneratedPackage(t *testing.T) {
	var req runtimev1.ContainerStatusRequest
	if err := proto.Unmarshal(EncodeContainerStatusRequest("abc"), &req); err != nil || req.GetContainerId() != "abc" || req.GetVerbose() {
		t.Errorf("request %v, %v", &req, err)
	}
	b, _ := proto.Marshal(&runtimev1.ContainerStatusRequest{ContainerId: "def", Verbose: true})
	if id, err := DecodeContainerStatusRequest(b); err != nil || id != "def" {
		t.Errorf("DecodeContainerStatusRequest = %q, %v", id, err)
	}
	var vreq runtimev1.VersionRequest
	if err := proto.Unmarshal(EncodeVersionRequest("v1"), &vreq); err != nil || vreq.GetVersion() != "v1" {
		t.Errorf("version request %v, %v", &vreq, err)
	}
	want := Version{Version: "0.1.0", RuntimeName: "containerd", RuntimeVersion: "v1.7.22", RuntimeAPIVersion: "v1"}
	b, _ = proto.Marshal(&runtimev1.VersionResponse{Version: "0.1.0", RuntimeName: "containerd", RuntimeVersion: "v1.7.22", RuntimeApiVersion: "v1"})
	if got, err := DecodeVersion(b); err != nil || got != want {
		t.Errorf("DecodeVersion = %+v, %v", got, err)
	}
	var vresp runtimev1.VersionResponse
	if err := proto.Unmarshal(EncodeVersion(want), &vresp); err != nil || vresp.GetRuntimeApiVersion() != "v1" || vresp.GetRuntimeName() != "containerd" {
		t.Errorf("version response %v, %v", &vresp, err)
	}
}

// A cut answer is an error, never a partial result.
func TestTruncatedMessagesAreErrors(t *testing.T) {
	list, _ := proto.Marshal(realListResponse())
	status, _ := proto.Marshal(realStatusResponse())
	for _, n := range []int{1, 2, 7, len(list) / 2, len(list) - 1} {
		if _, err := DecodeListPodResourcesResponse(list[:n]); err == nil {
			t.Errorf("List answer cut at %d of %d bytes: no error", n, len(list))
		}
	}
	for _, n := range []int{1, 2, 7, len(status) / 2, len(status) - 1} {
		if _, _, err := DecodeContainerStatusResponse(status[:n]); err == nil {
			t.Errorf("ContainerStatus answer cut at %d of %d bytes: no error", n, len(status))
		}
	}
}
