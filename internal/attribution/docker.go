package attribution

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DockerResolver reads container names, images and Compose labels from the
// Docker Engine API, which Podman's compatibility service
// (`podman system service`) also serves.
//
// It is a small typed client for the one endpoint it needs,
// GET /containers/{id}/json, rather than the moby client: that module
// brings about thirty others (OpenTelemetry among them) and newer
// golang.org/x versions into every build of the exporter for one GET.
// Requests use the unversioned path, which the daemon serves at its own
// current API version, so there is no version to negotiate; the fields read
// (Name, Config.Image, Config.Labels) are in every API version.
type DockerResolver struct {
	client  *http.Client
	baseURL string // "http://docker" for a unix socket
	socket  string // as configured, for error messages
}

// maxInspectBytes bounds the inspect answer; real ones are a few KiB.
const maxInspectBytes = 4 << 20

// NewDockerResolver returns a resolver for the API at socket, either
// "unix:///path/to/docker.sock", a bare path, or "tcp://host:port" (plain
// HTTP). Nothing is dialled until the first lookup. timeout bounds each
// whole call, the dial included.
func NewDockerResolver(socket string, timeout time.Duration) (*DockerResolver, error) {
	dialer := &net.Dialer{Timeout: timeout}
	transport := &http.Transport{
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		DisableCompression:    true,
	}
	r := &DockerResolver{socket: socket, client: &http.Client{Transport: transport, Timeout: timeout}}
	switch {
	case strings.HasPrefix(socket, "unix://") || strings.HasPrefix(socket, "/"):
		path := strings.TrimPrefix(socket, "unix://")
		if path == "" {
			return nil, fmt.Errorf("--docker.socket %q: empty socket path", socket)
		}
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		}
		r.baseURL = "http://docker"
	case strings.HasPrefix(socket, "tcp://"):
		host := strings.TrimPrefix(socket, "tcp://")
		if _, _, err := net.SplitHostPort(host); err != nil {
			return nil, fmt.Errorf("--docker.socket %q: %w", socket, err)
		}
		transport.DialContext = dialer.DialContext
		r.baseURL = "http://" + host
	default:
		return nil, fmt.Errorf("--docker.socket %q: want unix:///path or tcp://host:port", socket)
	}
	return r, nil
}

// Source implements ContainerResolver.
func (r *DockerResolver) Source() string { return "docker" }

// Handles implements ContainerResolver: Docker's containers, and Podman's
// through its Docker-compatible API.
func (r *DockerResolver) Handles(runtime string) bool {
	return runtime == RuntimeDocker || runtime == RuntimePodman
}

// dockerInspect is the part of GET /containers/{id}/json that is used.
type dockerInspect struct {
	Name   string `json:"Name"`
	Config struct {
		Image  string            `json:"Image"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

// Resolve implements ContainerResolver.
func (r *DockerResolver) Resolve(ctx context.Context, id string) (ContainerMeta, error) {
	var meta ContainerMeta
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.baseURL+"/containers/"+url.PathEscape(id)+"/json", nil)
	if err != nil {
		return meta, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return meta, fmt.Errorf("docker API %s: %w: %w", r.socket, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxInspectBytes))
	if err != nil {
		return meta, fmt.Errorf("docker API %s: reading inspect of %s: %w: %w", r.socket, id, ErrUnavailable, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return meta, fmt.Errorf("docker API %s: no container %s", r.socket, id)
	case resp.StatusCode != http.StatusOK:
		return meta, fmt.Errorf("docker API %s: inspect %s: HTTP %d: %s", r.socket, id, resp.StatusCode, firstLine(body))
	}
	var in dockerInspect
	if err := json.Unmarshal(body, &in); err != nil {
		return meta, fmt.Errorf("docker API %s: inspect %s: %w", r.socket, id, err)
	}
	labels := in.Config.Labels
	meta = ContainerMeta{
		// The API names containers with a leading "/".
		Name:           strings.TrimPrefix(in.Name, "/"),
		Image:          in.Config.Image,
		ComposeProject: labels["com.docker.compose.project"],
		ComposeService: labels["com.docker.compose.service"],
		PodName:        labels["io.kubernetes.pod.name"],
		PodNamespace:   labels["io.kubernetes.pod.namespace"],
		PodContainer:   labels["io.kubernetes.container.name"],
	}
	return meta, nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
