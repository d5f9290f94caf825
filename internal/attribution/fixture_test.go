package attribution

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The fixture tree testdata/proc has one process per runtime × cgroup
// driver × cgroup version, in the kernel's file formats; testdata/rootfs
// holds the passwd file. Each row says who that process belongs to.
var fixtureOwners = []struct {
	pid  uint32
	what string
	want snapshot.Owner
}{
	{1001, "docker cgroupfs v1", own("1000", "alice", docker("f4f0b3caffa8f2c594d1bdd814d4a065d9e517ef0b54ae9b2ff0e46432e0ece0"))},
	{1002, "docker cgroupfs v2", own("1000", "alice", docker("51ddf3f59d3b176be0b4e4f6e6d227f1313a838f091c8c9adb5621b8536ef434"))},
	{1003, "docker systemd v1", own("1000", "alice", docker("b2a2b14d35e1c79d1ff6491b33dd30d413e89f75d4fa7c5563bb348aa2a114a8"))},
	{1004, "docker systemd v2", own("1000", "alice", docker("69823f5d8fd37bb8807ad52e57d3d0b5d2c828e50131390b3ae2e24c67cb2a07"))},
	{1005, "nested docker v1 (innermost)", own("1000", "alice", docker("3b3429fdc5c0dc1ce924cc57424b9d116d788ee5eee36a5721271c7fbe483d65"))},
	{1006, "nested docker v2 (innermost)", own("1000", "alice", docker("212fd9fc8d0c7b92b72951dc5dfe66f453965a882b93c4374b79e1cf9877b1f0"))},
	{1007, "docker hybrid, v2 line at /", own("1000", "alice", docker("a476ae8a18bda8dfcba2261f10d7dd04cbd45c7b6147572bf14a37104e5fe0c4"))},
	{1008, "containerd cgroupfs v1 burstable", own("1000", "alice", containerd("6c2a34e94ff73e106b43e0dc6b3e77148b7b653e4e49f900a6f0718ccb2da4a7"), pod("b128680e-4955-b751-8cb4-40bb161e0d1b", QoSBurstable))},
	{1009, "containerd cgroupfs v2 besteffort", own("1000", "alice", containerd("5be345b3279e28a3b3d31fa195ce15c031c5d396cfc961765441c94aa4fbe704"), pod("2e8f5d22-cf59-7bd8-81b1-80fcb0319e3a", QoSBestEffort))},
	{1010, "containerd cgroupfs v1 guaranteed", own("1000", "alice", containerd("aaa04036f0b02dc714c41a3849dbc987abed3f27a6170bc5c835b557befea24d"), pod("4f4b142d-b7b4-f208-0e50-1fd7b3374c0b", QoSGuaranteed))},
	{1011, "containerd systemd v1 burstable", own("1000", "alice", containerd("cf1ae8d7980913d50f110a21d52008427c84be577607e7d2bf2157feb39aa905"), pod("b5e73804-f28b-d9ef-6bba-fe1f5f23be90", QoSBurstable))},
	{1012, "containerd systemd v2 guaranteed", own("1000", "alice", containerd("85d21612fc0c40108214a22a43aac811cdad5391ffca9e51db752cf8fc467013"), pod("f684e1ed-4c31-7a42-cc22-e201ab05e206", QoSGuaranteed))},
	{1013, "containerd systemd v2 besteffort", own("1000", "alice", containerd("53fc0db1a3260a9cb2eae18cac289e2a671fcfe4cf114aea7b2f318b5ab41b89"), pod("bea12cc0-dee1-c918-f83d-c04c368bbcca", QoSBestEffort))},
	{1014, "cri-o systemd v2 burstable", own("1000", "alice", crio("98fc6075acf2dac9bcd0b9d829432a49bae9676d09b450aca3db6ae194aef08c"), pod("f76bd088-addc-b639-d3af-9bb2e8043685", QoSBurstable))},
	{1015, "cri-o systemd v1 guaranteed", own("1000", "alice", crio("43308d8a65424189dbef83bb1e37d4a808a86575f5cc1b031ecc396d88a2a7d1"), pod("249f041c-cea7-5ab4-3e39-2621498d9581", QoSGuaranteed))},
	{1016, "cri-o cgroupfs v1 besteffort", own("1000", "alice", crio("99c8647c99b251ad7e4a5889681ad5d78da6d4b86fa25748a1124aa608eccb02"), pod("85999cbc-53c1-cb01-28bd-3ddcfc1ed215", QoSBestEffort))},
	{1017, "cri-o conmon: in the pod, no container", withCommand(own("0", "root", pod("54650863-bc2b-4d97-4141-7429279a888f", QoSBurstable)), "/usr/bin/conmon -c 4e367f78eaf4f16997334692e59f703955ebbb6321340b0b019522272c5a1e54")},
	{1018, "podman systemd v2, container sub-cgroup", own("1000", "alice", podman("7c26ef4e566c04a44b26ab7380120e9667323b6b105d9cfd50e6cd641b814587"))},
	{1019, "podman rootless v2", own("1000", "alice", podman("56dfa3bc944415a972b0fe05883435f6f061150cc65600d923a24fd565932362"))},
	{1020, "podman conmon: no container", withCommand(own("0", "root"), "/usr/bin/conmon --api-version 1")},
	{1021, "podman cgroupfs v1", own("1000", "alice", podman("71f22e46420383786ad0368231457d700152ee1cbaef66e3a9bedab52c258f43"))},
	{1022, "podman systemd v1", own("1000", "alice", podman("aa38bd0a4d8dceacf7e1acf6546b8bdd447a26de4b240248172d73f63b22b6f8"))},
	{1023, "slurm v1 step 0", own("2001", "carol", slurm("123", "0"))},
	{1024, "slurm v1 batch step", withCommand(own("2001", "carol", slurm("124", "batch")), "/bin/bash /var/spool/slurmd/job00124/slurm_script")},
	{1025, "slurm v1 extern step", withCommand(own("2001", "carol", slurm("125", "extern")), "sleep 100000000")},
	{1026, "slurm v2 step 0", own("2001", "carol", slurm("126", "0"))},
	{1027, "slurm v2 batch step", own("2001", "carol", slurm("127", "batch"))},
	{1028, "slurm job from the environment (proctrack/linuxproc)", own("2001", "carol", slurm("128", "batch"))},
	{1029, "host session", own("1000", "alice")},
	{1030, "hybrid, only the v2 line names the container", own("1000", "alice", docker("d29d513551872cc520c3acf964bd2d35d82636f4f126046f8dbb42d34b031b7c"))},
	{1031, "garbage cgroup file", own("1000", "alice")},
	{1032, "uid not in passwd", own("4242", "")},
	{1033, "long command line, cut on a character boundary", withCommand(own("1000", "alice"), "python3 -c print('"+strings.Repeat("é", 119))},
	{1035, "zombie: empty cmdline, odd comm", withCommand(own("1001", "bob"), "my (odd) proc")},
	{1036, "quotes, newline and unicode kept as they are", withCommand(own("1000", "alice"), "sh -c echo \"a\nb\" 'ü' 🚀")},
}

type ownerOpt func(*snapshot.Owner)

func own(uid, user string, opts ...ownerOpt) snapshot.Owner {
	o := snapshot.Owner{UID: uid, User: user, Command: "python3 train.py --epochs 10"}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func withCommand(o snapshot.Owner, cmd string) snapshot.Owner { o.Command = cmd; return o }

func container(runtime, id string) ownerOpt {
	return func(o *snapshot.Owner) { o.Container.Runtime, o.Container.ID = runtime, id }
}
func docker(id string) ownerOpt     { return container(RuntimeDocker, id) }
func containerd(id string) ownerOpt { return container(RuntimeContainerd, id) }
func crio(id string) ownerOpt       { return container(RuntimeCRIO, id) }
func podman(id string) ownerOpt     { return container(RuntimePodman, id) }
func pod(uid, qos string) ownerOpt {
	return func(o *snapshot.Owner) { o.Pod.UID, o.Pod.QoSClass = uid, qos }
}
func slurm(job, step string) ownerOpt {
	return func(o *snapshot.Owner) { o.Slurm.JobID, o.Slurm.Step = job, step }
}

func newFixtureAttributor(t testing.TB, opts Options) *Attributor {
	t.Helper()
	if opts.ProcRoot == "" {
		opts.ProcRoot = "testdata/proc"
	}
	if opts.RootFS == "" {
		opts.RootFS = "testdata/rootfs"
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestFixtureOwners reads every fixture process twice: with whole command
// lines (the table's commands), and by default, when the command is the
// executable's name only. The fixtures have no exe link (as when gpuwatch
// may not ptrace the process), so that name is comm.
func TestFixtureOwners(t *testing.T) {
	for _, full := range []bool{true, false} {
		t.Run(fmt.Sprintf("full-command-lines=%v", full), func(t *testing.T) {
			a := newFixtureAttributor(t, Options{FullCommandLines: full})
			s := &snapshot.Snapshot{}
			for _, row := range fixtureOwners {
				s.Processes = append(s.Processes, snapshot.Process{GPU: 0, PID: row.pid})
			}
			a.Enrich(context.Background(), s)
			for i, row := range fixtureOwners {
				t.Run(row.what, func(t *testing.T) {
					want := row.want
					want.StartTime = 100000 + uint64(row.pid)
					if !full {
						want.Command = fixtureComm(t, row.pid)
					}
					if got := s.Processes[i].Owner; got != want {
						t.Errorf("pid %d:\n got %+v\nwant %+v", row.pid, got, want)
					}
				})
			}
			if n := s.AttributionErrors[SourceProcfs]; n != 0 {
				t.Errorf("procfs errors = %d, want 0", n)
			}
		})
	}
}

// fixtureComm is the command name in a fixture's stat file: between the
// first '(' and the last ')'.
func fixtureComm(t *testing.T, pid uint32) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/proc", strconv.FormatUint(uint64(pid), 10), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b[bytes.IndexByte(b, '(')+1 : bytes.LastIndexByte(b, ')')])
}
