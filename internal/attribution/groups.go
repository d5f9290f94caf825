package attribution

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// Processes are grouped by container and by Slurm job when their procfs
// cache entry is created, so that a warm Enrich finds the unique
// containers and jobs of a scrape by following pointers instead of hashing
// a 64-character container id per process. A group lives as long as some
// cached process points to it (pidcache.go counts the references).

// containerKey names a container across runtimes.
type containerKey struct {
	runtime string
	id      string
}

// containerGroup is one container, shared by the cached processes in it.
type containerGroup struct {
	key       containerKey
	resolvers []int         // indices into Attributor.resolvers of those that handle key.runtime, in order
	meta      ContainerMeta // the resolvers' merged answer as of the latest Enrich that listed it
	version   uint64        // counts changes of meta; 0 before the first
	refs      int           // cache entries pointing here
	seen      uint64        // the latest Enrich that listed it
}

// jobGroup is one Slurm job, shared by the cached processes in it.
type jobGroup struct {
	id      string
	job     snapshot.SlurmJob // Slurm's answer as of the latest Enrich that listed it
	version uint64            // counts changes of job; 0 before the first
	refs    int
	seen    uint64
}

// containerGroupFor returns the group of a container, creating it
// unreferenced if need be, or nil when no resolver is asked about it.
func (a *Attributor) containerGroupFor(runtime, id string) *containerGroup {
	if id == "" {
		return nil
	}
	key := containerKey{runtime, id}
	if g := a.containers[key]; g != nil {
		return g
	}
	var resolvers []int
	for ri, r := range a.resolvers {
		if r.resolver.Handles(runtime) {
			resolvers = append(resolvers, ri)
		}
	}
	if len(resolvers) == 0 {
		return nil
	}
	g := &containerGroup{key: key, resolvers: resolvers}
	a.containers[key] = g
	return g
}

// jobGroupFor returns the group of a Slurm job, creating it unreferenced if
// need be, or nil when Slurm is not asked about it.
func (a *Attributor) jobGroupFor(id string) *jobGroup {
	if id == "" || a.slurm == nil {
		return nil
	}
	if g := a.jobs[id]; g != nil {
		return g
	}
	g := &jobGroup{id: id}
	a.jobs[id] = g
	return g
}

// sweepGroups forgets groups that no cached process refers to: those made
// for processes that had no cache entry (see uncachedEntry).
func (a *Attributor) sweepGroups() {
	for key, g := range a.containers {
		if g.refs <= 0 {
			delete(a.containers, key)
		}
	}
	for id, g := range a.jobs {
		if g.refs <= 0 {
			delete(a.jobs, id)
		}
	}
}
