//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The attribution fleet: 8 GPUs × 256 processes spread over 50
// containers (Docker, cgroupfs Docker and Podman cgroup shapes), written as
// a procfs tree and a simulator config, with a Docker-compatible API on a
// unix socket that names the containers.
const (
	fleetGPUs          = 8
	fleetProcsPerGPU   = 256
	fleetContainers    = 50
	fleetFirstPID      = 200000
	fleetProcessMemory = 256 << 20
)

// fleet is a generated attribution workload.
type fleet struct {
	dir       string // holds proc/, sim.yaml, docker.sock
	simConfig string
	procRoot  string
	socket    string
	server    *http.Server
}

func newFleet() (*fleet, error) {
	dir, err := os.MkdirTemp("", "gwbench")
	if err != nil {
		return nil, err
	}
	f := &fleet{dir: dir, procRoot: filepath.Join(dir, "proc"), simConfig: filepath.Join(dir, "sim.yaml"), socket: filepath.Join(dir, "docker.sock")}
	ids := make([]string, fleetContainers)
	for c := range ids {
		ids[c] = fmt.Sprintf("%064x", c+1)
	}
	var cfg strings.Builder
	cfg.WriteString("profile: dgx-h100\nprocesses:\n")
	for gpu := range fleetGPUs {
		for i := range fleetProcsPerGPU {
			n := gpu*fleetProcsPerGPU + i
			pid := fleetFirstPID + n
			if err := writeFakeProcess(f.procRoot, pid, ids[n%fleetContainers], n); err != nil {
				return nil, err
			}
			fmt.Fprintf(&cfg, "  - {gpu: %d, pid: %d, used_memory_bytes: %d, sm_utilization: 0.003%s}\n", gpu, pid, fleetProcessMemory, migPlacement(gpu, i))
		}
	}
	if err := os.WriteFile(f.simConfig, []byte(cfg.String()), 0o644); err != nil {
		return nil, err
	}
	return f, f.serveDocker(ids)
}

// writeFakeProcess writes the /proc/PID files attribution reads.
func writeFakeProcess(root string, pid int, containerID string, n int) error {
	var cgroup string
	switch n % 3 {
	case 0:
		cgroup = "0::/system.slice/docker-" + containerID + ".scope\n"
	case 1:
		cgroup = "0::/docker/" + containerID + "\n"
	default:
		cgroup = "0::/machine.slice/libpod-" + containerID + ".scope/container\n"
	}
	// Field 22 (start time) makes (pid, start time) the cache key.
	stat := fmt.Sprintf("%d (python3) S 1 %d %d 0 -1 4194304 100 0 0 0 10 5 0 0 20 0 8 0 %d 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", pid, pid, pid, 1000+n)
	status := fmt.Sprintf("Name:\tpython3\nPid:\t%d\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n", pid)
	files := map[string]string{
		"stat":    stat,
		"status":  status,
		"comm":    "python3\n",
		"cmdline": "python3\x00train.py\x00--rank\x00" + strconv.Itoa(n) + "\x00",
		"cgroup":  cgroup,
		"environ": "PATH=/usr/bin\x00",
	}
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// serveDocker answers GET /containers/ID/json like the Docker Engine API.
func (f *fleet) serveDocker(ids []string) error {
	known := map[string]int{}
	for i, id := range ids {
		known[id] = i
	}
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		// Paths may carry an API version prefix: /v1.41/containers/ID/json.
		if len(parts) < 3 || parts[len(parts)-1] != "json" || parts[len(parts)-3] != "containers" {
			http.NotFound(w, r)
			return
		}
		i, ok := known[parts[len(parts)-2]]
		if !ok {
			http.Error(w, `{"message":"No such container"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"Id":     ids[i],
			"Name":   fmt.Sprintf("/job-%d", i),
			"Config": map[string]any{"Image": "registry.example/train:v1", "Labels": map[string]string{"com.docker.compose.project": "bench"}},
		})
	})
	f.server = &http.Server{Handler: mux}
	go func() { _ = f.server.Serve(l) }()
	return nil
}

func (f *fleet) Close() {
	if f.server != nil {
		_ = f.server.Close()
	}
	_ = os.RemoveAll(f.dir)
}

// migPlacement puts the processes of dgx-h100's GPU 7, which runs in MIG
// mode (GPU instances 1: 3g.40gb, 5: 2g.20gb, 13 and 14: 1g.10gb), into its
// instances in proportion to their memory.
func migPlacement(gpu, i int) string {
	if gpu != 7 {
		return ""
	}
	instance := [8]int{1, 1, 1, 1, 5, 5, 13, 14}[i%8]
	return fmt.Sprintf(", gpu_instance: %d", instance)
}
