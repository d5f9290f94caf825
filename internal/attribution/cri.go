package attribution

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/grpcunix"
	"github.com/gpuwatch/gpuwatch/internal/kubeapi"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Labels that the kubelet puts on every container it asks a CRI runtime to
// create.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// DefaultCRISockets are where the CRI runtimes serve it, in the order
// DetectSocket should try them: containerd, CRI-O, k3s's and MicroK8s's
// embedded containerd.
var DefaultCRISockets = []string{
	"/run/containerd/containerd.sock",
	"/var/run/crio/crio.sock",
	"/run/k3s/containerd/containerd.sock",
	"/var/snap/microk8s/common/run/containerd.sock",
}

// criMaxMessageBytes bounds one answer; the kubelet's CRI client allows
// the same.
const criMaxMessageBytes = 16 << 20

// CRIResolver reads a Kubernetes container's pod name, namespace and
// container name from the CRI runtime service of containerd or CRI-O
// (k8s.io/cri-api runtime.v1 ContainerStatus), from the io.kubernetes.*
// labels the kubelet sets.
//
// It implements ContainerResolver; the Attributor caches its answers per
// container id (Options.CacheTTL, NegativeCacheTTL) and backs off from the
// socket after an ErrUnavailable, so the resolver itself caches nothing.
// Each call is bounded by the timeout given to NewCRIResolver as well as by
// its context.
type CRIResolver struct {
	socket  string // as configured, for error messages
	timeout time.Duration
	conn    *grpcunix.Conn
}

// NewCRIResolver returns a resolver for the CRI runtime service at socket,
// a path or "unix:///path", e.g. /run/containerd/containerd.sock or
// /var/run/crio/crio.sock. timeout bounds each call, the connection
// included (default 1s). Nothing is dialled until the first lookup, so an
// absent socket is not an error here.
func NewCRIResolver(socket string, timeout time.Duration) (*CRIResolver, error) {
	if timeout <= 0 {
		timeout = time.Second
	}
	conn, err := dialUnixGRPC("--cri.socket", socket, criMaxMessageBytes)
	if err != nil {
		return nil, err
	}
	return &CRIResolver{socket: socket, timeout: timeout, conn: conn}, nil
}

// Close releases the connection. Lookups after Close fail.
func (c *CRIResolver) Close() error { return c.conn.Close() }

// Source implements ContainerResolver.
func (c *CRIResolver) Source() string { return SourceCRI }

// Handles implements ContainerResolver: the runtimes that serve the CRI.
// Docker containers (cri-dockerd) carry the same labels and are read by
// the Docker resolver.
func (c *CRIResolver) Handles(runtime string) bool {
	return runtime == RuntimeContainerd || runtime == RuntimeCRIO
}

// Resolve implements ContainerResolver. A container that is not a
// Kubernetes container (no io.kubernetes labels) is not an error: its
// name and image are returned with the pod fields empty.
func (c *CRIResolver) Resolve(ctx context.Context, containerID string) (ContainerMeta, error) {
	st, err := c.status(ctx, containerID)
	if err != nil {
		return ContainerMeta{}, err
	}
	labels := st.Labels
	image := st.UserSpecifiedImage
	if image == "" {
		image = st.Image
	}
	return ContainerMeta{
		Name:         st.Name,
		Image:        image,
		PodName:      labels[labelPodName],
		PodNamespace: labels[labelPodNamespace],
		PodContainer: labels[labelContainerName],
	}, nil
}

// Pod returns the Kubernetes identity of a container: pod UID, name and
// namespace and container name. QoSClass is not known to the runtime (the
// cgroup path gives it).
func (c *CRIResolver) Pod(ctx context.Context, containerID string) (snapshot.Pod, error) {
	st, err := c.status(ctx, containerID)
	if err != nil {
		return snapshot.Pod{}, err
	}
	labels := st.Labels
	return snapshot.Pod{
		UID:       labels[labelPodUID],
		Name:      labels[labelPodName],
		Namespace: labels[labelPodNamespace],
		Container: labels[labelContainerName],
	}, nil
}

// status asks for one container. Non-verbose: the verbose info map is a
// JSON dump of the whole OCI spec, much larger and not needed.
func (c *CRIResolver) status(ctx context.Context, containerID string) (kubeapi.ContainerStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.conn.Invoke(ctx, kubeapi.MethodContainerStatus, kubeapi.EncodeContainerStatusRequest(containerID))
	if err != nil {
		return kubeapi.ContainerStatus{}, fmt.Errorf("CRI %s: ContainerStatus %s: %w", c.socket, containerID, grpcFailure(err))
	}
	st, ok, err := kubeapi.DecodeContainerStatusResponse(resp)
	if err != nil {
		return kubeapi.ContainerStatus{}, fmt.Errorf("CRI %s: ContainerStatus %s: %w", c.socket, containerID, err)
	}
	if !ok {
		return kubeapi.ContainerStatus{}, fmt.Errorf("CRI %s: ContainerStatus %s: answer has no status", c.socket, containerID)
	}
	return st, nil
}
