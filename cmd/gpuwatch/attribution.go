package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/attribution"
)

// attributionFlags say where to look up who owns each GPU process.
type attributionFlags struct {
	procfs       string
	rootfs       string
	dockerSocket string
	timeout      time.Duration
	cacheTTL     time.Duration
	revalidate   time.Duration
}

func (a *attributionFlags) register(app *kingpin.Application) {
	app.Flag("path.procfs", "procfs mount point. The driver reports host PIDs, so in a container mount the host's /proc here and run in the host PID namespace.").
		Default("/proc").StringVar(&a.procfs)
	app.Flag("path.rootfs", "Host root filesystem as mounted in gpuwatch's container; user names then come from ROOTFS/etc/passwd. Empty: this system's /etc/passwd.").
		Default("").StringVar(&a.rootfs)
	app.Flag("docker.socket", "Docker Engine API (or Podman's Docker-compatible service) for container names, images and compose labels. Empty turns it off.").
		Default("unix:///var/run/docker.sock").StringVar(&a.dockerSocket)
	app.Flag("attribution.timeout", "Bound on each owner lookup (one socket call, one Slurm query) and on all attribution in one collection; a scrape never waits longer.").
		Default("1s").DurationVar(&a.timeout)
	app.Flag("attribution.cache-ttl", "How long a container runtime's or Slurm's answer is kept.").
		Default("5m").DurationVar(&a.cacheTTL)
	app.Flag("attribution.revalidate-interval", "How often a cached process is checked against /proc for a reused PID. Shorter narrows the window in which a reused PID keeps its old owner; longer costs less.").
		Default("30s").DurationVar(&a.revalidate)
}

// attributor builds the owner resolver from the flags.
func (a *attributionFlags) attributor(logger *slog.Logger) (*attribution.Attributor, error) {
	at, err := attribution.New(attribution.Options{
		ProcRoot:           a.procfs,
		RootFS:             a.rootfs,
		DockerSocket:       a.dockerSocket,
		Timeout:            a.timeout,
		Logger:             logger,
		CacheTTL:           a.cacheTTL,
		RevalidateInterval: a.revalidate,
	})
	if err != nil {
		return nil, fmt.Errorf("process attribution: %w", err)
	}
	return at, nil
}
