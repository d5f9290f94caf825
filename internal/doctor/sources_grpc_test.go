package doctor

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimev1 "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

type grpcRuntime struct {
	runtimev1.UnimplementedRuntimeServiceServer
}

func (grpcRuntime) Version(context.Context, *runtimev1.VersionRequest) (*runtimev1.VersionResponse, error) {
	return &runtimev1.VersionResponse{Version: "0.1.0", RuntimeName: "cri-o", RuntimeVersion: "1.31.0", RuntimeApiVersion: "v1"}, nil
}

type grpcKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
}

func (grpcKubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		{Name: "a", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{{
			Name:    "c",
			Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-x"}}},
		}}},
		{Name: "b", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{{
			Name: "c",
			DynamicResources: []*podresourcesv1.DynamicResource{{ClaimName: "g", ClaimNamespace: "ns",
				ClaimResources: []*podresourcesv1.ClaimResource{{DriverName: "gpu.nvidia.com", DeviceName: "gpu-0"}}}},
		}}},
	}}, nil
}

// doctor's CRI and kubelet checks against grpc-go servers built from the
// real generated packages, as containerd, CRI-O and the kubelet are.
func TestSourceChecksAgainstGRPCGoServers(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	serve := func(name string, register func(*grpc.Server)) string {
		path := filepath.Join(dir, name)
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		register(srv)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(srv.Stop)
		return path
	}
	cri := serve("cri.sock", func(s *grpc.Server) { runtimev1.RegisterRuntimeServiceServer(s, grpcRuntime{}) })
	kubelet := serve("kubelet.sock", func(s *grpc.Server) { podresourcesv1.RegisterPodResourcesListerServer(s, grpcKubelet{}) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if got, err := pingCRI(ctx, cri); err != nil || got != "cri-o 1.31.0 (CRI v1)" {
		t.Errorf("pingCRI = %q, %v", got, err)
	}
	got, err := listKubelet(ctx, kubelet)
	if err != nil || !strings.HasPrefix(got, "2 pods hold devices") || !strings.Contains(got, "nvidia.com/gpu") || !strings.Contains(got, "DRA drivers: gpu.nvidia.com") {
		t.Errorf("listKubelet = %q, %v", got, err)
	}
}
