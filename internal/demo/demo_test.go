//go:build cgo

package demo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/attribution"
	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
	"github.com/gpuwatch/gpuwatch/internal/demo"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// demoFor starts the demo for a simulated profile and returns it with one
// snapshot of that host read through the real NVML reader.
func demoFor(t *testing.T, profile string) (*demo.Env, *snapshot.Snapshot) {
	t.Helper()
	s, err := sim.New(sim.Config{Profile: profile, Seed: "demo-test"})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := nvmlbackend.New(s, nvmlbackend.Options{Groups: map[string]bool{snapshot.GroupInfo: true, snapshot.GroupProcesses: true, snapshot.GroupMIG: true}, Now: s.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reader.Close() })
	snap, err := reader.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	opts := demo.Options{Node: "gpu-node-1"}
	for _, p := range s.Processes() {
		opts.Processes = append(opts.Processes, demo.Process{GPU: p.GPU, GPUUUID: p.GPUUUID, PID: p.PID})
	}
	for _, d := range snap.Devices {
		opts.GPUs = append(opts.GPUs, demo.GPU{Index: d.Index, UUID: d.UUID})
	}
	for _, gi := range s.IdleGPUInstances() {
		opts.IdleGPUInstances = append(opts.IdleGPUInstances, demo.GPUInstance{
			GPU: gi.GPU, Minor: gi.Minor, Profile: gi.Profile, ProfileID: gi.ProfileID, PlacementStart: gi.PlacementStart,
		})
	}
	env, err := demo.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	return env, snap
}

// attributor wires the real attribution code to the demo as gpuwatch does.
func attributor(t *testing.T, env *demo.Env) *attribution.Attributor {
	t.Helper()
	cri, err := attribution.NewCRIResolver(env.CRISocket, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cri.Close() })
	kubelet, err := attribution.NewKubeletResolver(env.KubeletSocket, 5*time.Second, attribution.DefaultKubeletTTL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kubelet.Close() })
	jobs, err := slurm.NewJobLookup(slurm.JobLookupOptions{Runner: env.Slurm})
	if err != nil {
		t.Fatal(err)
	}
	at, err := attribution.New(attribution.Options{
		ProcRoot: env.ProcRoot, RootFS: env.RootFS, DockerSocket: env.DockerSocket,
		Resolvers:         []attribution.ContainerResolver{cri},
		AllocationSources: []attribution.AllocationSource{kubelet, &slurm.NodeAllocations{Lookup: jobs, Node: "gpu-node-1"}},
		Slurm:             jobs.Lookup,
		// Generous: the CI box is busy, and the answers are local.
		Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = at.Close() })
	return at
}

// TestDemoOwnersThroughRealAttribution: every simulated process of the
// dgx-h100 demo resolves, through the attribution code a real node runs,
// to a unix user, and between them to a Slurm job, a Docker Compose
// container and a Kubernetes pod; the GPUs' allocations come from the
// kubelet and Slurm.
func TestDemoOwnersThroughRealAttribution(t *testing.T) {
	env, snap := demoFor(t, "dgx-h100")
	at := attributor(t, env)
	at.Enrich(context.Background(), snap)

	if len(snap.Processes) != 8 {
		t.Fatalf("%d processes", len(snap.Processes))
	}
	kinds := map[string]bool{}
	for _, p := range snap.Processes {
		o := p.Owner
		if o.User == "" || o.UID == "" || o.Command == "" {
			t.Errorf("pid %d: no user or command: %+v", p.PID, o)
		}
		switch {
		case o.Slurm.JobID != "":
			if o.Slurm.User == "" || o.Slurm.Account == "" || o.Slurm.Partition != "gpu" || o.Slurm.User != o.User {
				t.Errorf("pid %d: Slurm job without its details: %+v", p.PID, o.Slurm)
			}
			kinds["slurm"] = true
		case o.Container.ComposeProject != "":
			if o.Container.Runtime != attribution.RuntimeDocker || o.Container.Name == "" || o.Container.ComposeService != "trainer" || o.Container.Image == "" {
				t.Errorf("pid %d: compose container = %+v", p.PID, o.Container)
			}
			kinds["compose"] = true
		case o.Pod.Name != "":
			if o.Pod.Namespace != "inference" || o.Pod.Container != "vllm" || o.Pod.UID == "" || o.Pod.QoSClass != "burstable" {
				t.Errorf("pid %d: pod = %+v", p.PID, o.Pod)
			}
			kinds["kubernetes"] = true
		default:
			if o.Container.ID != "" || o.Pod.UID != "" {
				t.Errorf("pid %d: half an owner: %+v", p.PID, o)
			}
			kinds["user"] = true
		}
	}
	if len(kinds) != 4 {
		t.Errorf("owner kinds = %v, want slurm, compose, kubernetes and user", kinds)
	}
	// Torchrun ranks 71201-71204 are one job on GPUs 0-3.
	for _, p := range snap.Processes[:4] {
		if p.Owner.Slurm.JobID != snap.Processes[0].Owner.Slurm.JobID || p.Owner.Slurm.JobID == "" {
			t.Errorf("rank pid %d: job %q", p.PID, p.Owner.Slurm.JobID)
		}
	}

	pods, jobs := map[int]string{}, map[int]string{}
	podMIG := ""
	for _, a := range snap.Allocations {
		if a.GPUUUID != snap.Devices[a.GPU].UUID {
			t.Errorf("allocation %+v: UUID is not GPU %d's", a, a.GPU)
		}
		if a.Pod.Name != "" {
			pods[a.GPU] = a.Pod.Namespace + "/" + a.Pod.Name
			if a.GPU == 7 {
				podMIG = a.MIGUUID
			}
		}
		if a.Slurm.JobID != "" {
			jobs[a.GPU] = a.Slurm.JobID
		}
	}
	// The vllm pod through the device plugin; an idle embedder pod holds
	// GPU 7's idle 2g.20gb MIG instance (GPU instance 5) through a DRA
	// claim.
	if len(pods) != 2 || pods[6] != "inference/vllm-0" || pods[7] != "inference/embedder-0" {
		t.Errorf("kubelet allocations = %v, want the vllm pod on GPU 6 and the embedder on GPU 7", pods)
	}
	if i := slices.IndexFunc(snap.Devices[7].MIGInstances, func(m snapshot.MIGInstance) bool { return m.UUID == podMIG }); i < 0 ||
		snap.Devices[7].MIGInstances[i].GPUInstanceID != 5 || snap.Devices[7].MIGInstances[i].Profile != "2g.20gb" {
		t.Errorf("embedder pod's MIG instance %q, want GPU 7's 2g.20gb: %+v", podMIG, snap.Devices[7].MIGInstances)
	}
	// GPUs 0-3 (training), 5 (idle interactive job), 7 (embedding service).
	for _, gpu := range []int{0, 1, 2, 3, 5, 7} {
		if jobs[gpu] == "" {
			t.Errorf("GPU %d: no Slurm job holds it: %v", gpu, jobs)
		}
	}
	if jobs[5] == jobs[0] || jobs[5] == jobs[7] {
		t.Errorf("idle GPU 5 is held by a busy job: %v", jobs)
	}
	for source, n := range snap.AttributionErrors {
		if n != 0 {
			t.Errorf("%d %s errors", n, source)
		}
	}
}

// TestDemoEveryProfile: every profile's processes get an owner, and Close
// leaves nothing behind.
func TestDemoEveryProfile(t *testing.T) {
	for _, p := range sim.Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			env, snap := demoFor(t, p.Name)
			attributor(t, env).Enrich(context.Background(), snap)
			for _, proc := range snap.Processes {
				if proc.Owner.User == "" {
					t.Errorf("pid %d: no user", proc.PID)
				}
			}
			env.Close()
			if _, err := os.Stat(filepath.Join(env.Dir)); !os.IsNotExist(err) {
				t.Errorf("demo directory left behind: %v", err)
			}
		})
	}
}

// TestSlurmCommandsRefuseOthers: an unknown job is Slurm's "Invalid job
// id", which the lookup treats as a finished job; other commands fail.
func TestSlurmCommandsRefuseOthers(t *testing.T) {
	env, _ := demoFor(t, "h100")
	jobs, err := slurm.NewJobLookup(slurm.JobLookupOptions{Runner: env.Slurm})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Lookup(context.Background(), "999999"); err == nil || !errors.Is(err, slurm.ErrJobNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := env.Slurm.Run(context.Background(), "sinfo", "--json"); err == nil {
		t.Error("sinfo answered")
	}
	if allocs, err := jobs.Allocations(context.Background(), "other-node"); err != nil || len(allocs) != 0 {
		t.Errorf("another node's allocations = %v, %v", allocs, err)
	}
}

// TestSlurmCommandsAnswerDoctor: gpuwatch doctor's two lines get what
// Slurm prints (the controller up, this node known, another node not), and
// a command line that differs in one argument or in length is refused.
func TestSlurmCommandsAnswerDoctor(t *testing.T) {
	env, _ := demoFor(t, "h100")
	run := func(path string, args ...string) (string, error) {
		b, err := env.Slurm.Run(context.Background(), path, args...)
		return string(b), err
	}
	if out, err := run("/usr/bin/scontrol", "ping"); err != nil || !strings.Contains(out, "is UP") {
		t.Errorf("scontrol ping = %q, %v", out, err)
	}
	if out, err := run("scontrol", "show", "node", "-o", "gpu-node-1"); err != nil || !strings.HasPrefix(out, "NodeName=gpu-node-1 ") {
		t.Errorf("scontrol show node (this node) = %q, %v", out, err)
	}
	var cmdErr *slurm.CommandError
	if out, err := run("scontrol", "show", "node", "-o", "gpu-node-2"); !errors.As(err, &cmdErr) || cmdErr.Stderr != "Node gpu-node-2 not found" {
		t.Errorf("scontrol show node (another node) = %q, %v", out, err)
	}
	for _, args := range [][]string{
		{"-h", "-w", "gpu-node-1", "-t", "PENDING", "-o", "%i"},
		{"-h", "-w", "gpu-node-1", "-t", "RUNNING", "-o"},
		{"-h", "-w", "gpu-node-1", "-t", "RUNNING", "-o", "%i", "-v"},
	} {
		if out, err := run("squeue", args...); err == nil {
			t.Errorf("squeue %v answered %q", args, out)
		}
	}
	if out, err := run("squeue", "-h", "-w", "gpu-node-1", "-t", "RUNNING", "-o", "%i"); err != nil || out == "" {
		t.Errorf("squeue for this node = %q, %v", out, err)
	}
	if out, err := run("scontrol", "ping", "-v"); err == nil {
		t.Errorf("scontrol ping -v answered %q", out)
	}
}
