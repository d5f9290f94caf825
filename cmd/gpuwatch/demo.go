//go:build cgo

package main

import (
	"log/slog"

	"github.com/gpuwatch/gpuwatch/internal/demo"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
)

// startDemo starts the demo's procfs, passwd, runtimes, kubelet and Slurm
// for the simulated host and points attribution and Slurm at them.
func (f *commonFlags) startDemo(logger *slog.Logger, st *stack, attr *attributionFlags, sf *slurmFlags) error {
	env, err := f.demoEnv(logger, st.nv.sim)
	if err != nil {
		return err
	}
	st.closers = append(st.closers, env.Close)
	st.demo = true
	attr.useDemo(env)
	sf.runner = env.Slurm
	return nil
}

// demoEnv starts the demo for the simulated host.
func (f *commonFlags) demoEnv(logger *slog.Logger, s *sim.Sim) (*demo.Env, error) {
	opts := demo.Options{Node: f.slurm.nodeName, Logger: logger, Ended: s.ProcessEnded, ClockStart: s.ClockStart()}
	for _, p := range s.Processes() {
		opts.Processes = append(opts.Processes, demo.Process{GPU: p.GPU, GPUUUID: p.GPUUUID, PID: p.PID})
	}
	for i, uuid := range s.GPUUUIDs() {
		opts.GPUs = append(opts.GPUs, demo.GPU{Index: i, UUID: uuid})
	}
	for _, gi := range s.IdleGPUInstances() {
		opts.IdleGPUInstances = append(opts.IdleGPUInstances, demo.GPUInstance{
			GPU: gi.GPU, Minor: gi.Minor, Profile: gi.Profile, ProfileID: gi.ProfileID, PlacementStart: gi.PlacementStart,
		})
	}
	env, err := demo.Start(opts)
	if err != nil {
		return nil, err
	}
	logger.Debug("demo owners", "dir", env.Dir, "workloads", len(env.Workloads))
	return env, nil
}

// useDemo points attribution at the demo's files and sockets.
func (a *attributionFlags) useDemo(env *demo.Env) {
	a.procfs, a.rootfs = env.ProcRoot, env.RootFS
	a.dockerSocket, a.criSocket, a.kubeletSock = env.DockerSocket, env.CRISocket, env.KubeletSocket
}
