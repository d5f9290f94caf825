package webui

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// OwnerOf names who a process belongs to, most specific first: Slurm
// job, pod, compose service, container, user.
func OwnerOf(o snapshot.Owner) (kind, name string) {
	switch {
	case o.Slurm.JobID != "":
		return "slurm_job", o.Slurm.JobID
	case o.Pod.Name != "":
		return "pod", o.Pod.Namespace + "/" + o.Pod.Name
	case o.Container.ComposeService != "":
		return "compose_service", o.Container.ComposeProject + "/" + o.Container.ComposeService
	case o.Container.Name != "":
		return "container", o.Container.Name
	case o.User != "":
		return "user", o.User
	case o.UID != "":
		return "user", "uid " + o.UID
	}
	return "unknown", ""
}
