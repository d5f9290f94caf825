package doctor

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimev1 "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// checkSources: each runtime socket is present, reachable and answers
// within the timeout; the kubelet's GPU resource names.
func checkSources(env Env) []Result {
	if !env.Attribution {
		return nil
	}
	if env.NotStarted {
		return []Result{skip("owner sources", notStarted)}
	}
	return []Result{
		socketCheck(env, "docker", "--docker.socket", env.DockerSocket, pingDocker),
		socketCheck(env, "cri", "--cri.socket", env.CRISocket, pingCRI),
		socketCheck(env, "kubelet", "--kubelet.pod-resources-socket", env.KubeletSocket, listKubelet),
	}
}

// notStarted is what a check that needs the set-up owner sources says
// when gpuwatch could not start.
const notStarted = "not checked: gpuwatch stopped at the driver (see above) before setting the owner sources up"

func socketCheck(env Env, name, flag, socket string, ask func(ctx context.Context, path string) (string, error)) Result {
	check := name + " socket"
	if socket == "" {
		return skip(check, "off, or not found at start ("+flag+"=auto)")
	}
	path := strings.TrimPrefix(socket, "unix://")
	if strings.HasPrefix(socket, "tcp://") {
		path = socket
	} else if _, err := os.Stat(path); err != nil {
		return fail(check, err.Error(), "point "+flag+" at the runtime's socket (in a container, mount it), or set "+flag+"= to turn it off", true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), env.Timeout)
	defer cancel()
	start := time.Now()
	answer, err := ask(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return fail(check, fmt.Sprintf("%s: no answer within %s", socket, env.Timeout),
				"the service behind "+socket+" hangs: restart it, or raise --attribution.timeout", true)
		}
		return fail(check, fmt.Sprintf("%s: %v", socket, err), "check that the service runs and that gpuwatch's user may open "+socket, true)
	}
	return ok(check, fmt.Sprintf("%s answers in %s: %s", socket, time.Since(start).Round(time.Millisecond), answer))
}

func pingDocker(ctx context.Context, path string) (string, error) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			if strings.HasPrefix(path, "tcp://") {
				return d.DialContext(ctx, "tcp", strings.TrimPrefix(path, "tcp://"))
			}
			return d.DialContext(ctx, "unix", path)
		},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/containers/json?limit=1", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /containers/json: HTTP %d", resp.StatusCode)
	}
	return "Docker Engine API lists containers", nil
}

func dialUnix(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func pingCRI(ctx context.Context, path string) (string, error) {
	conn, err := dialUnix(path)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	v, err := runtimev1.NewRuntimeServiceClient(conn).Version(ctx, &runtimev1.VersionRequest{})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s (CRI %s)", v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion()), nil
}

func listKubelet(ctx context.Context, path string) (string, error) {
	conn, err := dialUnix(path)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return "", err
	}
	var names []string
	pods := 0
	for _, p := range resp.GetPodResources() {
		holds := false
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				if !slices.Contains(names, d.GetResourceName()) {
					names = append(names, d.GetResourceName())
				}
				holds = true
			}
		}
		if holds {
			pods++
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "pod-resources API answers; no pod holds a device now", nil
	}
	return fmt.Sprintf("%d pods hold devices; resource names: %s", pods, strings.Join(names, ", ")), nil
}
