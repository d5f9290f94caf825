//go:build cgo

package demo

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/grpcunix"
)

// Options describe the simulated host the demo serves.
type Options struct {
	Processes []Process
	GPUs      []GPU
	// IdleGPUInstances are the host's MIG GPU instances without a
	// process; a Kubernetes pod holds the first through a DRA claim.
	IdleGPUInstances []GPUInstance
	// Node is the host's Slurm node name (--slurm.node-name).
	Node string
	// Ended, when set, says whether a process has ended for good: a Slurm
	// job or pod whose processes have all ended leaves squeue, scontrol
	// and the kubelet's list, as its allocation would. Nil: never.
	Ended func(pid uint32) bool
	// Logger receives the servers' errors. Default: discard.
	Logger *slog.Logger
	// ClockStart is the simulated clock's zero (sim.Sim.ClockStart): the
	// demo's jobs started a while before it. Zero: sim.Epoch.
	ClockStart time.Time
}

// Env is a running demo: the paths and sockets to point attribution at,
// and the Slurm commands. Close stops the servers and removes the files.
type Env struct {
	Dir           string // the temporary directory holding everything
	ProcRoot      string // --path.procfs
	RootFS        string // --path.rootfs
	DockerSocket  string // --docker.socket, unix:///…
	CRISocket     string // --cri.socket
	KubeletSocket string // --kubelet.pod-resources-socket
	Slurm         *SlurmCommands
	Workloads     []Workload

	closers []func()
}

// Start writes the demo's procfs tree and passwd and starts its servers.
func Start(opts Options) (env *Env, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if n := removeStale(os.TempDir()); n > 0 {
		opts.Logger.Info("removed demo directories left by gpuwatch processes that were killed", "count", n)
	}
	// Short: a unix socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if err := markOwner(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("demo: %w", err)
	}
	env = &Env{
		Dir:       dir,
		ProcRoot:  filepath.Join(dir, "proc"),
		RootFS:    filepath.Join(dir, "root"),
		Workloads: withDRAPod(plan(opts.Processes, opts.GPUs), opts.IdleGPUInstances, opts.Node),
	}
	env.closers = append(env.closers, func() { _ = os.RemoveAll(dir) })
	defer func() {
		if err != nil {
			env.Close()
			env = nil
		}
	}()
	if err := os.MkdirAll(env.ProcRoot, 0o755); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if err := writeProcfs(env.ProcRoot, env.Workloads); err != nil {
		return nil, fmt.Errorf("demo procfs: %w", err)
	}
	if err := writePasswd(env.RootFS); err != nil {
		return nil, fmt.Errorf("demo passwd: %w", err)
	}

	docker := filepath.Join(dir, "docker.sock")
	if err := env.serveHTTP(docker, NewDockerAPI(env.Workloads), opts.Logger); err != nil {
		return nil, err
	}
	env.DockerSocket = "unix://" + docker
	env.CRISocket = filepath.Join(dir, "containerd.sock")
	if err := env.serveGRPC(env.CRISocket, NewCRI(env.Workloads).Methods()); err != nil {
		return nil, err
	}
	env.KubeletSocket = filepath.Join(dir, "kubelet.sock")
	k := NewKubelet(env.Workloads, opts.GPUs)
	if opts.Ended != nil {
		k.endWith(env.Workloads, opts.Ended)
	}
	if err := env.serveGRPC(env.KubeletSocket, k.Methods()); err != nil {
		return nil, err
	}
	env.Slurm = NewSlurmCommands(env.Workloads, opts.Node)
	env.Slurm.ended = opts.Ended
	if !opts.ClockStart.IsZero() {
		env.Slurm.clockStart = opts.ClockStart
	}
	return env, nil
}

func (e *Env) serveHTTP(socket string, h http.Handler, logger *slog.Logger) error {
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("demo Docker API stopped", "err", err)
		}
	}()
	e.closers = append(e.closers, func() { _ = srv.Close() })
	return nil
}

func (e *Env) serveGRPC(socket string, methods map[string]grpcunix.Handler) error {
	stop, err := grpcunix.Serve(socket, methods)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	e.closers = append(e.closers, stop)
	return nil
}

// Close stops the servers and removes the demo's files.
func (e *Env) Close() {
	for _, v := range slices.Backward(e.closers) {
		v()
	}
	e.closers = nil
}
