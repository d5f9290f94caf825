package attribution

import (
	"cmp"
	"strings"
)

// Container runtimes named by ParseCgroup. They are the values of
// snapshot.Container.Runtime.
const (
	RuntimeDocker     = "docker"
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimePodman     = "podman"
)

// Kubernetes QoS classes, the values of snapshot.Pod.QoSClass.
const (
	QoSGuaranteed = "guaranteed"
	QoSBurstable  = "burstable"
	QoSBestEffort = "besteffort"
)

// CgroupInfo is what a process's cgroup membership says about who owns it.
// Every field is empty when the cgroup paths do not say.
type CgroupInfo struct {
	Runtime     string // one of the Runtime* constants, set together with ContainerID
	ContainerID string // 64 lowercase hex digits
	PodUID      string // Kubernetes pod UID, dashes restored
	QoSClass    string // one of the QoS* constants, set together with PodUID
	SlurmJobID  string // decimal job id
	SlurmStep   string // "0", "batch", "extern", ... (empty when the process is in the job but not a step)
}

// ParseCgroup reads the content of /proc/PID/cgroup, for cgroup v1, v2 and
// hybrid hierarchies, and for the cgroupfs and systemd drivers of Docker,
// containerd (Kubernetes), CRI-O, Podman and Slurm.
//
// Each line is "hierarchy-ID:controller-list:path". On a hybrid host a
// process has one v2 line ("0::/...") and one line per v1 controller, and
// they need not agree: a runtime may place the process only in some v1
// controllers and leave the v2 path at "/". ParseCgroup therefore reads
// every line and keeps, for the container and the pod and for the Slurm job
// separately, the first line that identifies one, trying the v2 line first.
//
// Lines that do not parse are skipped; ParseCgroup never fails and never
// panics, whatever the input.
func ParseCgroup(content string) CgroupInfo {
	var best CgroupInfo
	haveContainer, havePod, haveSlurm := false, false, false
	take := func(path string) {
		info := parseCgroupPath(path)
		if !haveContainer && info.ContainerID != "" {
			best.Runtime, best.ContainerID = info.Runtime, info.ContainerID
			haveContainer = true
			// The pod of the line that named the container is the pod
			// of that container, even if an earlier line named another.
			if info.PodUID != "" {
				best.PodUID, best.QoSClass = info.PodUID, info.QoSClass
				havePod = true
			}
		}
		if !havePod && info.PodUID != "" {
			best.PodUID, best.QoSClass = info.PodUID, info.QoSClass
			havePod = true
		}
		if !haveSlurm && info.SlurmJobID != "" {
			best.SlurmJobID, best.SlurmStep = info.SlurmJobID, info.SlurmStep
			haveSlurm = true
		}
	}

	// First pass: the unified (v2) line, "0::path".
	for line := range strings.Lines(content) {
		if path, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "0::"); ok {
			take(path)
		}
	}
	// Second pass: every v1 line, in file order.
	for line := range strings.Lines(content) {
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "0::") {
			continue
		}
		// The path itself may contain ':'; only the first two separate fields.
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		take(path)
	}
	return best
}

// parseCgroupPath reads one cgroup path. Walking the segments from the root
// means nested containers end with the innermost one, which is the
// container the process really runs in.
func parseCgroupPath(path string) CgroupInfo {
	if !strings.HasPrefix(path, "/") {
		return CgroupInfo{}
	}
	var w cgroupWalk
	segments := strings.Split(path[1:], "/")
	for i, seg := range segments {
		next := ""
		if i+1 < len(segments) {
			next = segments[i+1]
		}
		// Each step reads the segments it knows; the first that knows
		// one takes it, in this order.
		_ = w.kubernetes(seg) || w.docker(seg, next) || w.slurm(seg) || w.scope(seg)
	}
	return w.result()
}

// cgroupWalk is what the segments of one cgroup path have said so far.
type cgroupWalk struct {
	info                CgroupInfo
	inKubepods, inSlurm bool
	qos                 string
}

// kubernetes reads the pod hierarchy:
//
//	cgroupfs driver: /kubepods[/burstable|/besteffort]/pod<uid>/<id>
//	systemd driver:  /kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid_>.slice/<scope>
func (w *cgroupWalk) kubernetes(seg string) bool {
	switch {
	case seg == "kubepods" || seg == "kubepods.slice":
		w.inKubepods = true
	case !w.inKubepods:
		return false
	case seg == "burstable" || seg == "kubepods-burstable.slice":
		w.qos = QoSBurstable
	case seg == "besteffort" || seg == "kubepods-besteffort.slice":
		w.qos = QoSBestEffort
	case strings.HasPrefix(seg, "pod"):
		if uid, ok := podUID(seg[len("pod"):]); ok {
			w.info.PodUID = uid
		}
	case strings.HasPrefix(seg, "kubepods-") && strings.HasSuffix(seg, ".slice"):
		// kubepods-pod<uid>.slice or kubepods-<qos>-pod<uid>.slice
		name := strings.TrimSuffix(seg, ".slice")
		if _, after, ok := strings.Cut(name, "-pod"); ok {
			if uid, ok := podUID(after); ok {
				w.info.PodUID = uid
			}
		}
	case w.info.PodUID != "" && isContainerID(seg):
		// A bare id under a pod is the cgroupfs layout of containerd's
		// CRI plugin: CRI-O always prefixes "crio-", and dockershim,
		// the other runtime that used bare ids, left Kubernetes in 1.24.
		w.info.Runtime, w.info.ContainerID = RuntimeContainerd, seg
	default:
		return false
	}
	return true
}

// docker reads Docker's cgroupfs layout, also nested: /docker/<id>/docker/<id2>.
func (w *cgroupWalk) docker(seg, next string) bool {
	if seg != "docker" || !isContainerID(next) {
		return false
	}
	w.info.Runtime, w.info.ContainerID = RuntimeDocker, next
	return true
}

// slurm reads a job step's cgroup: v1 /slurm/uid_N/job_N/step_X (also
// /slurm_<node>/... with several slurmd per host); v2
// /system.slice/slurmstepd.scope/job_N/step_X/...
func (w *cgroupWalk) slurm(seg string) bool {
	switch {
	case strings.HasPrefix(seg, "slurm"):
		w.inSlurm = true
	case w.inSlurm && strings.HasPrefix(seg, "job_") && isDecimal(seg[len("job_"):]):
		w.info.SlurmJobID = seg[len("job_"):]
		w.info.SlurmStep = ""
	case w.inSlurm && w.info.SlurmJobID != "" && strings.HasPrefix(seg, "step_") && isStepName(seg[len("step_"):]):
		w.info.SlurmStep = seg[len("step_"):]
	default:
		return false
	}
	return true
}

// scope reads systemd scopes and prefixed cgroupfs names of containers.
func (w *cgroupWalk) scope(seg string) bool {
	runtime, id, ok := scopeContainer(seg)
	if ok {
		w.info.Runtime, w.info.ContainerID = runtime, id
	}
	return ok
}

func (w *cgroupWalk) result() CgroupInfo {
	info := w.info
	if info.PodUID != "" {
		// Guaranteed pods sit directly under kubepods, with no QoS level
		// between.
		info.QoSClass = cmp.Or(w.qos, QoSGuaranteed)
	}
	return info
}

// scopePrefixes are the names runtimes give a container's own cgroup,
// "<prefix><id>.scope" under systemd and "<prefix><id>" under cgroupfs.
// The conmon monitors of CRI-O and Podman ("crio-conmon-<id>",
// "libpod-conmon-<id>") do not match, since "conmon-<id>" is not an id.
var scopePrefixes = []struct{ prefix, runtime string }{
	{"docker-", RuntimeDocker},
	{"cri-containerd-", RuntimeContainerd},
	{"nerdctl-", RuntimeContainerd},
	{"crio-", RuntimeCRIO},
	{"libpod-", RuntimePodman},
}

func scopeContainer(seg string) (runtime, id string, ok bool) {
	name := strings.TrimSuffix(seg, ".scope")
	for _, p := range scopePrefixes {
		if rest, found := strings.CutPrefix(name, p.prefix); found && isContainerID(rest) {
			return p.runtime, rest, true
		}
	}
	return "", "", false
}

// isContainerID reports whether s is a full container id: 64 lowercase hex
// digits, as Docker, containerd, CRI-O and Podman all use. Requiring the full
// form keeps names like /docker/buildkit from passing for containers.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// podUID validates a pod UID as written in a cgroup name and restores the
// dashes that the systemd driver turns into underscores (systemd reserves
// '-' for slice nesting). Ordinary pods have an RFC 4122 UUID; static pods
// a 32-digit hash of their manifest.
func podUID(s string) (string, bool) {
	if len(s) == 0 || len(s) > 64 {
		return "", false
	}
	hex := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			hex++
		case c == '-' || c == '_':
		default:
			return "", false
		}
	}
	if hex < 16 {
		return "", false
	}
	return strings.ReplaceAll(s, "_", "-"), true
}

func isDecimal(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isStepName accepts Slurm step names as they appear in cgroup paths:
// a step number, "batch", "extern", "interactive", or a het-job
// component such as "0+1".
func isStepName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && c != '+' && c != '_' {
			return false
		}
	}
	return true
}
