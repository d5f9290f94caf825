//go:build cgo

package demo_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimev1 "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuwatch/gpuwatch/internal/demo"
)

// grpcConn is a grpc-go client of a demo socket, as the real kubelet and
// crictl are: the demo's servers (internal/grpcunix, internal/kubeapi) must
// answer it as containerd and the kubelet would.
func grpcConn(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestDemoServesGRPCClients(t *testing.T) {
	env, _ := demoFor(t, "dgx-h100")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pods, err := podresourcesv1.NewPodResourcesListerClient(grpcConn(t, env.KubeletSocket)).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var kubernetes []demo.Workload
	for _, w := range env.Workloads {
		if w.Kind == demo.KindKubernetes {
			kubernetes = append(kubernetes, w)
		}
	}
	if len(kubernetes) == 0 || len(pods.GetPodResources()) != len(kubernetes) {
		t.Fatalf("List: %d pods, want one per Kubernetes workload (%d)", len(pods.GetPodResources()), len(kubernetes))
	}
	held := 0
	for _, p := range pods.GetPodResources() {
		for _, c := range p.GetContainers() {
			held += len(c.GetDevices()) + len(c.GetDynamicResources())
		}
	}
	if held < len(kubernetes) {
		t.Errorf("List: %d device entries for %d pods: %v", held, len(kubernetes), pods)
	}

	cri := runtimev1.NewRuntimeServiceClient(grpcConn(t, env.CRISocket))
	w := kubernetes[0]
	st, err := cri.ContainerStatus(ctx, &runtimev1.ContainerStatusRequest{ContainerId: w.ContainerID})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.GetStatus(); got.GetId() != w.ContainerID || got.GetMetadata().GetName() != w.PodContainer ||
		got.GetLabels()["io.kubernetes.pod.name"] != w.PodName || got.GetState() != runtimev1.ContainerState_CONTAINER_RUNNING {
		t.Errorf("ContainerStatus(%s) = %v", w.ContainerID, got)
	}
	if _, err := cri.ContainerStatus(ctx, &runtimev1.ContainerStatusRequest{ContainerId: "absent"}); status.Code(err) != codes.NotFound {
		t.Errorf("ContainerStatus(absent): %v, want NotFound", err)
	}
	v, err := cri.Version(ctx, &runtimev1.VersionRequest{})
	if err != nil || v.GetRuntimeName() != "containerd" || v.GetRuntimeApiVersion() != "v1" {
		t.Errorf("Version = %v, %v", v, err)
	}
	if _, err := cri.ListContainers(ctx, &runtimev1.ListContainersRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ListContainers: %v, want Unimplemented", err)
	}
}
