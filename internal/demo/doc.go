//go:build cgo

// Package demo gives the simulated GPU host (--backend=sim) owners to find.
//
// The simulator's PIDs exist nowhere, so on its own the real attribution
// code finds no owner for them. The demo builds, for the simulated
// processes, what that code reads on a real node, and nothing else:
//
//   - a procfs tree (stat, status, cmdline, comm, cgroup, environ per PID)
//     and an /etc/passwd under a temporary directory (--path.procfs,
//     --path.rootfs);
//   - the Docker Engine API on a unix socket (GET /containers/ID/json);
//   - a CRI runtime service and the kubelet pod-resources service, gRPC on
//     unix sockets (internal/grpcunix, with the messages of k8s.io/cri-api
//     and k8s.io/kubelet encoded by internal/kubeapi; grpc-go clients are
//     served as containerd and the kubelet serve them, TestDemoServesGRPCClients);
//   - Slurm's scontrol and squeue, as a slurm.CommandRunner that prints
//     what those commands print, for the real parser to read.
//
// The processes are grouped into workloads (ranks of one job have nearby
// PIDs) and the workloads take turns being a Slurm job, a Docker Compose
// service, a Kubernetes pod and a plain unix user's process. A GPU without
// a process is held by an idle interactive Slurm job, and an idle MIG GPU
// instance by an idle Kubernetes pod through a resource claim of NVIDIA's
// DRA driver (Dynamic Resource Allocation). Everything is a
// deterministic function of the process list, so a demo page is the same
// in every run.
package demo
