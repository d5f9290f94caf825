package main

import (
	"fmt"
	"log/slog"
	"os"
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
	// fullCommandLines shows every argument of GPU processes' command
	// lines; off, only the executable's name (privacy by default).
	fullCommandLines bool
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
	app.Flag("kubelet.pod-resources-socket", "Kubelet pod-resources API socket, which says which pod each GPU or MIG instance is allocated to (device plugin, or a DRA claim of NVIDIA's DRA driver), even while its processes are idle. auto: "+
		attribution.DefaultKubeletPodResourcesSocket+" if it exists at start; empty: off.").
		Default(autoSocket).IsSetByUser(&a.set.kubelet).StringVar(&a.kubeletSock)
	app.Flag("attribution.timeout", "Bound on each owner lookup (one socket call, one Slurm query) and on all attribution in one collection. Its own budget, after the GPU read's --collection.timeout, so that a slow GPU does not leave the healthy GPUs' processes without owners: a collection takes at most the sum (keep it below Prometheus's scrape_timeout). 1s: a local socket answers in milliseconds, and an answer that comes later is cached for the next scrape.").
		Default("1s").DurationVar(&a.timeout)
	app.Flag("attribution.cache-ttl", "How long a container runtime's or Slurm's answer is kept.").
		Default("5m").DurationVar(&a.cacheTTL)
	app.Flag("attribution.revalidate-interval", "How often a cached process is checked against /proc for a reused PID. Shorter narrows the window in which a reused PID keeps its old owner; longer costs less.").
		Default("30s").DurationVar(&a.revalidate)
	app.Flag("attribution.full-command-lines", "Show each GPU process's whole command line, every argument, where gpuwatch shows its command: "+
		"the JSON API's command field, the live page, and the command label of --collector.processes.pid-labels (also in textfiles). "+
		"Off, they show the executable's name only (python3, not python3 train.py --api-key=...). "+
		"RISK: arguments often hold tokens, passwords and private paths; with this on, everyone who can read the page, the API or the metrics (and Prometheus) reads them. "+
		"`gpuwatch ps` always shows whole command lines, as ps does.").
		Default("false").BoolVar(&a.fullCommandLines)
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

// sourceReport is what the start log says about the attribution sources:
// those in use, those looked for ("auto") and not found, and per source the
// flag to check when it fails.
type sourceReport struct {
	on, absent []string
	hints      map[string]string
	how        string // the Attributor's own description
	// What the flags resolved to, for gpuwatch doctor: socket per source
	// ("" when off or absent), the procfs, and Slurm's job lookups.
	sockets map[string]string
	procfs  string
	slurm   *slurmFlags // nil when Slurm job attribution is off
}

// socketSource resolves one socket flag, notes the outcome in rep and
// warns when a socket given explicitly does not exist: a DaemonSet with a
// wrong hostPath then says so at start, not only in a counter.
func (rep *sourceReport) socketSource(logger *slog.Logger, source, flag, value string, candidates ...string) string {
	socket := resolveSocket(value, candidates...)
	if rep.sockets == nil {
		rep.sockets = map[string]string{}
	}
	rep.sockets[source] = socket
	switch {
	case value == autoSocket && socket == "":
		rep.absent = append(rep.absent, source)
	case socket != "":
		rep.on = append(rep.on, source)
		rep.hints[source] = "--" + flag + "=" + value
		path := strings.TrimPrefix(socket, "unix://")
		if _, err := os.Stat(path); err != nil && !strings.HasPrefix(socket, "tcp://") {
			logger.Warn("socket not found; its owner labels stay empty until it appears", "flag", "--"+flag, "socket", socket, "err", err)
		}
	}
	return socket
}

// attributor builds the owner resolver from the flags. The returned closer
// releases the gRPC connections of the Kubernetes resolvers.
func (a *attributionFlags) attributor(logger *slog.Logger, jobs *slurm.JobLookup, slurmNode string, rep *sourceReport) (*attribution.Attributor, func(), error) {
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	rep.on = append(rep.on, attribution.SourceProcfs)
	rep.procfs = a.procfs
	rep.hints[attribution.SourceProcfs] = "--path.procfs=" + a.procfs
	docker := rep.socketSource(logger, attribution.SourceDocker, "docker.socket", a.dockerSocket, defaultDockerSockets...)
	if a.dockerSocket == autoSocket && docker != "" {
		docker = "unix://" + docker
	}
	var resolvers []attribution.ContainerResolver
	if socket := rep.socketSource(logger, attribution.SourceCRI, "cri.socket", a.criSocket, attribution.DefaultCRISockets...); socket != "" {
		cri, err := attribution.NewCRIResolver(socket, a.timeout)
		if err != nil {
			return nil, nil, fmt.Errorf("--cri.socket: %w", err)
		}
		resolvers = append(resolvers, cri)
		closers = append(closers, cri.Close)
	}
	var allocations []attribution.AllocationSource
	if socket := rep.socketSource(logger, attribution.SourceKubelet, "kubelet.pod-resources-socket", a.kubeletSock, attribution.DefaultKubeletPodResourcesSocket); socket != "" {
		kubelet, err := attribution.NewKubeletResolver(socket, a.timeout, attribution.DefaultKubeletTTL)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--kubelet.pod-resources-socket: %w", err)
		}
		allocations = append(allocations, kubelet)
		closers = append(closers, kubelet.Close)
	}
	var slurmLookup attribution.SlurmLookup
	if jobs != nil {
		slurmLookup = jobs.Lookup
		allocations = append(allocations, &slurm.NodeAllocations{Lookup: jobs, Node: slurmNode})
		rep.on = append(rep.on, attribution.SourceSlurm)
		rep.hints[attribution.SourceSlurm] = "--slurm.node-name=" + slurmNode + " and scontrol/squeue reaching the controller"
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
		FullCommandLines:   a.fullCommandLines,
	})
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("process attribution: %w", err)
	}
	rep.how = at.String()
	closers = append(closers, at.Close)
	return at, closeAll, nil
}
