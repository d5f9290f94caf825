package demo

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimev1 "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// CRI answers the CRI runtime service's ContainerStatus, as containerd
// does, for the containers of the Kubernetes workloads. Other calls answer
// Unimplemented.
type CRI struct {
	runtimev1.UnimplementedRuntimeServiceServer
	containers map[string]*runtimev1.ContainerStatus
}

// NewCRI holds one container per Kubernetes workload.
func NewCRI(workloads []Workload) *CRI {
	c := &CRI{containers: map[string]*runtimev1.ContainerStatus{}}
	for _, w := range workloads {
		if w.Kind != KindKubernetes {
			continue
		}
		c.containers[w.ContainerID] = &runtimev1.ContainerStatus{
			Id:       w.ContainerID,
			Metadata: &runtimev1.ContainerMetadata{Name: w.PodContainer},
			State:    runtimev1.ContainerState_CONTAINER_RUNNING,
			Image:    &runtimev1.ImageSpec{Image: w.Image},
			ImageRef: w.Image,
			Labels: map[string]string{
				"io.kubernetes.pod.name":       w.PodName,
				"io.kubernetes.pod.namespace":  w.PodNamespace,
				"io.kubernetes.pod.uid":        w.PodUID,
				"io.kubernetes.container.name": w.PodContainer,
			},
		}
	}
	return c
}

// ContainerStatus implements runtimev1.RuntimeServiceServer.
func (c *CRI) ContainerStatus(_ context.Context, req *runtimev1.ContainerStatusRequest) (*runtimev1.ContainerStatusResponse, error) {
	st, ok := c.containers[req.GetContainerId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q not found", req.GetContainerId())
	}
	return &runtimev1.ContainerStatusResponse{Status: st}, nil
}

// Version implements runtimev1.RuntimeServiceServer.
func (c *CRI) Version(context.Context, *runtimev1.VersionRequest) (*runtimev1.VersionResponse, error) {
	return &runtimev1.VersionResponse{Version: "0.1.0", RuntimeName: "containerd", RuntimeVersion: "v1.7.22 (gpuwatch demo)", RuntimeApiVersion: "v1"}, nil
}

// Kubelet answers the kubelet pod-resources API: which GPUs each pod of
// the Kubernetes workloads holds, by GPU UUID under nvidia.com/gpu (the
// device plugin), or as a device of NVIDIA's DRA driver in a resource claim.
type Kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
}

// NewKubelet lists one pod per Kubernetes workload.
func NewKubelet(workloads []Workload, gpus []GPU) *Kubelet {
	uuid := map[int]string{}
	for _, g := range gpus {
		uuid[g.Index] = g.UUID
	}
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for _, w := range workloads {
		if w.Kind != KindKubernetes {
			continue
		}
		c := &podresourcesv1.ContainerResources{Name: w.PodContainer}
		if w.DRADevice != "" {
			claimUID := hexID("claim", w.PodName)
			c.DynamicResources = []*podresourcesv1.DynamicResource{{
				ClaimName: w.PodName + "-gpu", ClaimNamespace: w.PodNamespace,
				ClaimResources: []*podresourcesv1.ClaimResource{{
					DriverName: "gpu.nvidia.com", PoolName: w.DRAPool, DeviceName: w.DRADevice,
					CdiDevices: []*podresourcesv1.CDIDevice{{Name: "k8s.gpu.nvidia.com/claim=" + claimUID[:36] + "-" + w.DRADevice}},
				}},
			}}
		} else {
			var ids []string
			for _, g := range w.GPUs {
				ids = append(ids, uuid[g])
			}
			c.Devices = []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: ids}}
		}
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{
			Name: w.PodName, Namespace: w.PodNamespace, Containers: []*podresourcesv1.ContainerResources{c},
		})
	}
	return &Kubelet{resp: resp}
}

// List implements podresourcesv1.PodResourcesListerServer.
func (k *Kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return k.resp, nil
}

// GetAllocatableResources implements podresourcesv1.PodResourcesListerServer.
func (k *Kubelet) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	out := &podresourcesv1.AllocatableResourcesResponse{}
	for _, p := range k.resp.PodResources {
		for _, c := range p.Containers {
			out.Devices = append(out.Devices, c.Devices...)
		}
	}
	return out, nil
}
