package attribution

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	idA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	idB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func TestParseCgroup(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    CgroupInfo
	}{
		{"empty", "", CgroupInfo{}},
		{"root v2", "0::/\n", CgroupInfo{}},
		{"docker cgroupfs", "0::/docker/" + idA + "\n", CgroupInfo{Runtime: RuntimeDocker, ContainerID: idA}},
		{"docker buildkit is no container", "0::/docker/buildkit/" + idA[:12] + "\n", CgroupInfo{}},
		{"docker short id is no container", "0::/docker/" + idA[:12] + "\n", CgroupInfo{}},
		{"docker uppercase id is no container", "0::/docker/" + strings.ToUpper(idA) + "\n", CgroupInfo{}},
		{"docker nested keeps innermost", "0::/docker/" + idA + "/docker/" + idB + "\n", CgroupInfo{Runtime: RuntimeDocker, ContainerID: idB}},
		{"docker systemd scope", "0::/system.slice/docker-" + idA + ".scope\n", CgroupInfo{Runtime: RuntimeDocker, ContainerID: idA}},
		{"no trailing newline", "0::/system.slice/docker-" + idA + ".scope", CgroupInfo{Runtime: RuntimeDocker, ContainerID: idA}},
		{"CRLF", "0::/system.slice/docker-" + idA + ".scope\r\n", CgroupInfo{Runtime: RuntimeDocker, ContainerID: idA}},
		{"crio conmon ignored", "0::/machine.slice/crio-conmon-" + idA + ".scope\n", CgroupInfo{}},
		{"libpod conmon ignored", "0::/machine.slice/libpod-conmon-" + idA + ".scope\n", CgroupInfo{}},
		{"podman cgroupns child", "0::/machine.slice/libpod-" + idA + ".scope/container\n", CgroupInfo{Runtime: RuntimePodman, ContainerID: idA}},
		{"nerdctl", "0::/system.slice/nerdctl-" + idA + ".scope\n", CgroupInfo{Runtime: RuntimeContainerd, ContainerID: idA}},
		{"static pod hash uid", "0::/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" + idA + "\n",
			CgroupInfo{Runtime: RuntimeContainerd, ContainerID: idA, PodUID: "0123456789abcdef0123456789abcdef", QoSClass: QoSBurstable}},
		{"pod-level cgroup only", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1111aaaa_2222_3333_4444_555566667777.slice\n",
			CgroupInfo{PodUID: "1111aaaa-2222-3333-4444-555566667777", QoSClass: QoSBestEffort}},
		{"bare id outside kubepods is nothing", "0::/" + idA + "\n", CgroupInfo{}},
		{"kubepods bare id without pod is nothing", "0::/kubepods/burstable/" + idA + "\n", CgroupInfo{}},
		{"pod uid with bad characters", "0::/kubepods/podxyz-not-a-uid/" + idA + "\n", CgroupInfo{}},
		{"slurm v1", "4:freezer:/slurm/uid_1000/job_123/step_0\n", CgroupInfo{SlurmJobID: "123", SlurmStep: "0"}},
		{"slurm v1 job level", "4:freezer:/slurm/uid_1000/job_123\n", CgroupInfo{SlurmJobID: "123"}},
		{"slurm v1 multiple slurmd", "4:freezer:/slurm_node7/uid_1000/job_9/step_extern\n", CgroupInfo{SlurmJobID: "9", SlurmStep: "extern"}},
		{"slurm v2", "0::/system.slice/slurmstepd.scope/job_77/step_interactive/user/task_0\n", CgroupInfo{SlurmJobID: "77", SlurmStep: "interactive"}},
		{"slurmstepd itself", "0::/system.slice/slurmstepd.scope/system\n", CgroupInfo{}},
		{"job_ outside slurm is nothing", "0::/user.slice/job_5/step_0\n", CgroupInfo{}},
		{"slurm job id must be decimal", "0::/slurm/uid_1/job_12a/step_0\n", CgroupInfo{}},
		{"hybrid: first v1 line that names a container", "0::/\n3:memory:/docker/" + idA + "\n2:cpu:/docker/" + idB + "\n",
			CgroupInfo{Runtime: RuntimeDocker, ContainerID: idA}},
		{"hybrid: v2 line preferred", "3:memory:/docker/" + idA + "\n0::/system.slice/docker-" + idB + ".scope\n",
			CgroupInfo{Runtime: RuntimeDocker, ContainerID: idB}},
		{"hybrid: container and job from different lines", "0::/system.slice/docker-" + idA + ".scope\n4:freezer:/slurm/uid_1/job_5/step_0\n",
			CgroupInfo{Runtime: RuntimeDocker, ContainerID: idA, SlurmJobID: "5", SlurmStep: "0"}},
		{"path with colons", "5:devices:/weird:name/docker/" + idA + "\n", CgroupInfo{Runtime: RuntimeDocker, ContainerID: idA}},
		{"garbage", "\x00\xff\n:::\n0::\n0::x\n12\n::/docker/" + idA + "\n", CgroupInfo{Runtime: RuntimeDocker, ContainerID: idA}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseCgroup(tt.content); got != tt.want {
				t.Errorf("ParseCgroup(%q)\n got %+v\nwant %+v", tt.content, got, tt.want)
			}
		})
	}
}

// FuzzParseCgroup checks that no input makes the parser panic and that what
// it reports is always well-formed. The seeds are the fixture tree's files.
func FuzzParseCgroup(f *testing.F) {
	files, err := filepath.Glob("testdata/proc/*/cgroup")
	if err != nil || len(files) == 0 {
		f.Fatalf("no fixture cgroup files: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, content string) {
		got := ParseCgroup(content)
		if (got.Runtime == "") != (got.ContainerID == "") {
			t.Fatalf("runtime %q without id %q or the reverse", got.Runtime, got.ContainerID)
		}
		if got.ContainerID != "" && !isContainerID(got.ContainerID) {
			t.Fatalf("container id %q is not 64 hex digits", got.ContainerID)
		}
		switch got.Runtime {
		case "", RuntimeDocker, RuntimeContainerd, RuntimeCRIO, RuntimePodman:
		default:
			t.Fatalf("unknown runtime %q", got.Runtime)
		}
		if (got.PodUID == "") != (got.QoSClass == "") {
			t.Fatalf("pod uid %q and qos %q not set together", got.PodUID, got.QoSClass)
		}
		if strings.Contains(got.PodUID, "_") || !utf8.ValidString(got.PodUID) {
			t.Fatalf("pod uid %q not normalised", got.PodUID)
		}
		if got.SlurmJobID != "" && !isDecimal(got.SlurmJobID) {
			t.Fatalf("slurm job id %q not decimal", got.SlurmJobID)
		}
		if got.SlurmStep != "" && !isStepName(got.SlurmStep) {
			t.Fatalf("slurm step %q malformed", got.SlurmStep)
		}
		if got.SlurmStep != "" && got.SlurmJobID == "" {
			t.Fatalf("slurm step %q without job", got.SlurmStep)
		}
		if !strings.Contains(content, got.ContainerID) || !strings.Contains(content, got.SlurmJobID) {
			t.Fatalf("reported ids that are not in the input: %+v", got)
		}
	})
}
