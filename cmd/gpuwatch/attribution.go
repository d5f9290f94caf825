package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/attribution"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// attributionFlags say where to look up who owns each GPU process.
type attributionFlags struct {
	enabled      bool
	procfs       string
	rootfs       string
	dockerSocket string
	criSocket    string
	kubeletSock  string
	timeout      time.Duration
	cacheTTL     time.Duration
	revalidate   time.Duration
	// set records which sources the user named; with --backend=sim, the
	// demo's owners stand in only when none is (demo.go).
	set struct{ procfs, rootfs, docker, cri, kubelet bool }
}

func (a *attributionFlags) register(app *kingpin.Application) {
	app.Flag("attribution", "Look up who owns each GPU process (user, container, pod, Slurm job). --no-attribution reports processes without owners.").
		Default("true").BoolVar(&a.enabled)
	app.Flag("path.procfs", "procfs mount point. The driver reports host PIDs, so in a container mount the host's /proc here and run in the host PID namespace.").
		Default("/proc").IsSetByUser(&a.set.procfs).StringVar(&a.procfs)
	app.Flag("path.rootfs", "Host root filesystem as mounted in gpuwatch's container; user names then come from ROOTFS/etc/passwd. Empty: this system's /etc/passwd.").
		Default("").IsSetByUser(&a.set.rootfs).StringVar(&a.rootfs)
	app.Flag("docker.socket", "Docker Engine API (or Podman's Docker-compatible service) for container names, images and compose labels, e.g. unix:///var/run/docker.sock. auto: "+
		strings.Join(defaultDockerSockets, " or ")+" if it exists at start; empty: off.").
		Default(autoSocket).IsSetByUser(&a.set.docker).StringVar(&a.dockerSocket)
	app.Flag("cri.socket", "CRI runtime socket (containerd or CRI-O) for pod name, namespace and container of Kubernetes containers. auto: the first of "+
		strings.Join(attribution.DefaultCRISockets, ", ")+" that exists at start; empty: off.").
		Default(autoSocket).IsSetByUser(&a.set.cri).StringVar(&a.criSocket)
	app.Flag("kubelet.pod-resources-socket", "Kubelet pod-resources API socket, which says which pod each GPU is allocated to, even while its processes are idle. auto: "+
		attribution.DefaultKubeletPodResourcesSocket+" if it exists at start; empty: off.").
		Default(autoSocket).IsSetByUser(&a.set.kubelet).StringVar(&a.kubeletSock)
	app.Flag("attribution.timeout", "Bound on each owner lookup (one socket call, one Slurm query) and on all attribution in one collection; a scrape never waits longer.").
		Default("1s").DurationVar(&a.timeout)
	app.Flag("attribution.cache-ttl", "How long a container runtime's or Slurm's answer is kept.").
		Default("5m").DurationVar(&a.cacheTTL)
	app.Flag("attribution.revalidate-interval", "How often a cached process is checked against /proc for a reused PID. Shorter narrows the window in which a reused PID keeps its old owner; longer costs less.").
		Default("30s").DurationVar(&a.revalidate)
}

// autoSocket asks for a socket to be used when it exists at start. A node
// without Kubernetes then counts no errors for a source it does not have,
// while an explicit path is always used and its failures counted.
const autoSocket = "auto"

// defaultDockerSockets are where Docker and a rootful Podman service listen.
var defaultDockerSockets = []string{"/var/run/docker.sock", "/run/podman/podman.sock"}

func resolveSocket(flag string, candidates ...string) string {
	if flag == autoSocket {
		return attribution.DetectSocket(candidates...)
	}
	return flag
}

// attributor builds the owner resolver from the flags. The returned closer
// releases the gRPC connections of the Kubernetes resolvers.
func (a *attributionFlags) attributor(logger *slog.Logger, jobs *slurm.JobLookup, slurmNode string) (*attribution.Attributor, func(), error) {
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	var resolvers []attribution.ContainerResolver
	if socket := resolveSocket(a.criSocket, attribution.DefaultCRISockets...); socket != "" {
		cri, err := attribution.NewCRIResolver(socket, a.timeout)
		if err != nil {
			return nil, nil, fmt.Errorf("--cri.socket: %w", err)
		}
		logger.Info("reading pod names from the CRI runtime", "socket", socket)
		resolvers = append(resolvers, cri)
		closers = append(closers, cri.Close)
	}
	var allocations []attribution.AllocationSource
	if socket := resolveSocket(a.kubeletSock, attribution.DefaultKubeletPodResourcesSocket); socket != "" {
		kubelet, err := attribution.NewKubeletResolver(socket, a.timeout, attribution.DefaultKubeletTTL)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--kubelet.pod-resources-socket: %w", err)
		}
		logger.Info("reading GPU allocations from the kubelet", "socket", socket)
		allocations = append(allocations, kubelet)
		closers = append(closers, kubelet.Close)
	}
	var slurmLookup attribution.SlurmLookup
	if jobs != nil {
		slurmLookup = jobs.Lookup
		allocations = append(allocations, &slurm.NodeAllocations{Lookup: jobs, Node: slurmNode})
		logger.Info("attributing GPUs to Slurm jobs", "node", slurmNode)
	}
	docker := resolveSocket(a.dockerSocket, defaultDockerSockets...)
	if a.dockerSocket == autoSocket && docker != "" {
		docker = "unix://" + docker
	}
	at, err := attribution.New(attribution.Options{
		Resolvers:          resolvers,
		AllocationSources:  allocations,
		ProcRoot:           a.procfs,
		RootFS:             a.rootfs,
		DockerSocket:       docker,
		Slurm:              slurmLookup,
		Timeout:            a.timeout,
		Logger:             logger,
		CacheTTL:           a.cacheTTL,
		RevalidateInterval: a.revalidate,
	})
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("process attribution: %w", err)
	}
	logger.Info("process attribution", "how", at.String())
	closers = append(closers, at.Close)
	return at, closeAll, nil
}
