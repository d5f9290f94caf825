//go:build cgo

package demo

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimev1 "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// CRI answers the CRI runtime service's ContainerStatus and Version, as
// containerd does, for the containers of the Kubernetes workloads. Other
// calls answer Unimplemented.
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

// Register serves the runtime service on s.
func (c *CRI) Register(s *grpc.Server) { runtimev1.RegisterRuntimeServiceServer(s, c) }

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
// Other calls answer Unimplemented.
type Kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	// pods are the answer's pods, shared by every answer and never
	// modified: grpc-go only reads a message it sends.
	pods []*podresourcesv1.PodResources
	// gone says, per pod, whether it has ended (see Options.Ended).
	gone []func() bool
}

// NewKubelet lists one pod per Kubernetes workload.
func NewKubelet(workloads []Workload, gpus []GPU) *Kubelet {
	uuid := map[int]string{}
	for _, g := range gpus {
		uuid[g.Index] = g.UUID
	}
	var pods []*podresourcesv1.PodResources
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
		pods = append(pods, &podresourcesv1.PodResources{
			Name: w.PodName, Namespace: w.PodNamespace, Containers: []*podresourcesv1.ContainerResources{c},
		})
	}
	return &Kubelet{pods: pods}
}

// Register serves the pod-resources service on s.
func (k *Kubelet) Register(s *grpc.Server) { podresourcesv1.RegisterPodResourcesListerServer(s, k) }

// List implements podresourcesv1.PodResourcesListerServer: every pod, or,
// with Options.Ended, the pods that have not ended.
func (k *Kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	if k.gone == nil {
		return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
	}
	var pods []*podresourcesv1.PodResources
	for i, p := range k.pods {
		if !k.gone[i]() {
			pods = append(pods, p)
		}
	}
	return &podresourcesv1.ListPodResourcesResponse{PodResources: pods}, nil
}

// endWith has pods whose processes have all ended leave the list, as the
// kubelet drops a pod that completed.
func (k *Kubelet) endWith(workloads []Workload, ended func(pid uint32) bool) {
	k.gone = nil
	for _, w := range workloads {
		if w.Kind == KindKubernetes {
			k.gone = append(k.gone, func() bool { return w.ended(ended) })
		}
	}
}
