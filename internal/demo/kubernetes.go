//go:build cgo

package demo

import (
	"context"

	"github.com/gpuwatch/gpuwatch/internal/grpcunix"
	"github.com/gpuwatch/gpuwatch/internal/kubeapi"
)

// CRI answers the CRI runtime service's ContainerStatus, as containerd
// does, for the containers of the Kubernetes workloads. Other calls answer
// Unimplemented.
type CRI struct {
	containers map[string]kubeapi.ContainerStatus
}

// NewCRI holds one container per Kubernetes workload.
func NewCRI(workloads []Workload) *CRI {
	c := &CRI{containers: map[string]kubeapi.ContainerStatus{}}
	for _, w := range workloads {
		if w.Kind != KindKubernetes {
			continue
		}
		c.containers[w.ContainerID] = kubeapi.ContainerStatus{
			ID:       w.ContainerID,
			Name:     w.PodContainer,
			State:    kubeapi.ContainerStateRunning,
			Image:    w.Image,
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

// Methods are the calls the demo's runtime answers.
func (c *CRI) Methods() map[string]grpcunix.Handler {
	return map[string]grpcunix.Handler{
		kubeapi.MethodContainerStatus: c.containerStatus,
		kubeapi.MethodVersion:         c.version,
	}
}

func (c *CRI) containerStatus(_ context.Context, req []byte) ([]byte, error) {
	id, err := kubeapi.DecodeContainerStatusRequest(req)
	if err != nil {
		return nil, grpcunix.Errorf(grpcunix.Internal, err.Error())
	}
	st, ok := c.containers[id]
	if !ok {
		return nil, grpcunix.Errorf(grpcunix.NotFound, "container \""+id+"\" not found")
	}
	return kubeapi.EncodeContainerStatusResponse(st), nil
}

func (c *CRI) version(context.Context, []byte) ([]byte, error) {
	return kubeapi.EncodeVersion(kubeapi.Version{Version: "0.1.0", RuntimeName: "containerd", RuntimeVersion: "v1.7.22 (gpuwatch demo)", RuntimeAPIVersion: "v1"}), nil
}

// Kubelet answers the kubelet pod-resources API: which GPUs each pod of
// the Kubernetes workloads holds, by GPU UUID under nvidia.com/gpu (the
// device plugin), or as a device of NVIDIA's DRA driver in a resource claim.
type Kubelet struct {
	pods []kubeapi.PodResources
	resp []byte // the encoded List answer while no pod has ended
	// gone says, per pod, whether it has ended (see Options.Ended).
	gone []func() bool
}

// NewKubelet lists one pod per Kubernetes workload.
func NewKubelet(workloads []Workload, gpus []GPU) *Kubelet {
	uuid := map[int]string{}
	for _, g := range gpus {
		uuid[g.Index] = g.UUID
	}
	var pods []kubeapi.PodResources
	for _, w := range workloads {
		if w.Kind != KindKubernetes {
			continue
		}
		c := kubeapi.ContainerResources{Name: w.PodContainer}
		if w.DRADevice != "" {
			claimUID := hexID("claim", w.PodName)
			c.DynamicResources = []kubeapi.DynamicResource{{
				ClaimName: w.PodName + "-gpu", ClaimNamespace: w.PodNamespace,
				ClaimResources: []kubeapi.ClaimResource{{
					DriverName: "gpu.nvidia.com", PoolName: w.DRAPool, DeviceName: w.DRADevice,
					CDIDevices: []string{"k8s.gpu.nvidia.com/claim=" + claimUID[:36] + "-" + w.DRADevice},
				}},
			}}
		} else {
			var ids []string
			for _, g := range w.GPUs {
				ids = append(ids, uuid[g])
			}
			c.Devices = []kubeapi.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIDs: ids}}
		}
		pods = append(pods, kubeapi.PodResources{
			Name: w.PodName, Namespace: w.PodNamespace, Containers: []kubeapi.ContainerResources{c},
		})
	}
	return &Kubelet{pods: pods, resp: kubeapi.EncodeListPodResourcesResponse(pods)}
}

// Methods are the calls the demo's kubelet answers.
func (k *Kubelet) Methods() map[string]grpcunix.Handler {
	return map[string]grpcunix.Handler{kubeapi.MethodList: k.list}
}

// list answers List: every pod, or, with Options.Ended, the pods that
// have not ended.
func (k *Kubelet) list(context.Context, []byte) ([]byte, error) {
	if k.gone == nil {
		return k.resp, nil
	}
	var pods []kubeapi.PodResources
	for i, p := range k.pods {
		if !k.gone[i]() {
			pods = append(pods, p)
		}
	}
	return kubeapi.EncodeListPodResourcesResponse(pods), nil
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
