package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/health"
)

// healthFlags configure the health judge (internal/health), which every
// command that reads GPUs runs after attribution.
type healthFlags struct {
	policyFile string
	expectGPUs int
}

func (h *healthFlags) register(app *kingpin.Application) {
	app.Flag("health.policy", "YAML health policy: which checks fail or warn, XID codes to fail, warn on or ignore, windows (see docs/health.md). Validated at start. Default: NVIDIA's XID catalog and the checks' defaults.").
		PlaceHolder("FILE").StringVar(&h.policyFile)
	app.Flag("health.expect-gpus", "How many GPUs this node must have; fewer fails the node's health (gpu_count). 0: the count found at the first collection.").
		Default("0").IntVar(&h.expectGPUs)
}

// judge loads and validates the policy and returns its judge.
func (h *healthFlags) judge() (*health.Judge, error) {
	policy := health.DefaultPolicy()
	if h.policyFile != "" {
		p, err := health.LoadPolicy(h.policyFile)
		if err != nil {
			return nil, fmt.Errorf("--health.policy: %w", err)
		}
		policy = p
	}
	policy, err := policy.WithExpectGPUs(h.expectGPUs)
	if err != nil {
		return nil, err
	}
	return health.NewJudge(policy), nil
}

// collectionBudget is the longest one collection takes: the read, then
// the owner lookups, and a second of margin.
func (f *commonFlags) collectionBudget() time.Duration {
	return f.timeout + f.attribution.timeout + time.Second
}

// ready backs /readyz: with a GPU backend, ready while every GPU's readings
// are fresh (a collection now, within its budget); with --backend=none,
// once a collection succeeded.
func (s *stack) ready(f *commonFlags) func() error {
	if f.backend == "none" {
		return s.pipeline.Ready
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), f.collectionBudget())
		defer cancel()
		return s.pipeline.ReadyNow(ctx)
	}
}
