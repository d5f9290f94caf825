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

	"github.com/gpuwatch/gpuwatch/internal/grpcunix"
	"github.com/gpuwatch/gpuwatch/internal/kubeapi"
)

// checkSources: each runtime socket is present, reachable and answers
// within the timeout; the kubelet's GPU resource names and DRA drivers.
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
			if after, ok0 := strings.CutPrefix(path, "tcp://"); ok0 {
				return d.DialContext(ctx, "tcp", after)
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

// doctorMaxRecv bounds one answer of a runtime or the kubelet.
const doctorMaxRecv = 16 << 20

func pingCRI(ctx context.Context, path string) (string, error) {
	conn := grpcunix.New(path, doctorMaxRecv)
	defer conn.Close()
	resp, err := conn.Invoke(ctx, kubeapi.MethodVersion, kubeapi.EncodeVersionRequest("v1"))
	if err != nil {
		return "", err
	}
	v, err := kubeapi.DecodeVersion(resp)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s (CRI %s)", v.RuntimeName, v.RuntimeVersion, v.RuntimeAPIVersion), nil
}

func listKubelet(ctx context.Context, path string) (string, error) {
	conn := grpcunix.New(path, doctorMaxRecv)
	defer conn.Close()
	resp, err := conn.Invoke(ctx, kubeapi.MethodList, nil)
	if err != nil {
		return "", err
	}
	podResources, err := kubeapi.DecodeListPodResourcesResponse(resp)
	if err != nil {
		return "", err
	}
	var names, drivers []string
	pods := 0
	for _, p := range podResources {
		holds := false
		for _, c := range p.Containers {
			for _, d := range c.Devices {
				if !slices.Contains(names, d.ResourceName) {
					names = append(names, d.ResourceName)
				}
				holds = true
			}
			// DRA claims (kubelet 1.34+, or earlier with the
			// KubeletPodResourcesDynamicResources feature gate).
			for _, dr := range c.DynamicResources {
				for _, cr := range dr.ClaimResources {
					if !slices.Contains(drivers, cr.DriverName) {
						drivers = append(drivers, cr.DriverName)
					}
					holds = true
				}
			}
		}
		if holds {
			pods++
		}
	}
	slices.Sort(names)
	slices.Sort(drivers)
	if len(names) == 0 && len(drivers) == 0 {
		return "pod-resources API answers; no pod holds a device now", nil
	}
	var held []string
	if len(names) > 0 {
		held = append(held, "resource names: "+strings.Join(names, ", "))
	}
	if len(drivers) > 0 {
		held = append(held, "DRA drivers: "+strings.Join(drivers, ", "))
	}
	if pods == 1 {
		return "1 pod holds devices; " + strings.Join(held, "; "), nil
	}
	return fmt.Sprintf("%d pods hold devices; %s", pods, strings.Join(held, "; ")), nil
}
