package jobs

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Tracker folds accounting ticks into per-job figures and says which jobs
// ended. A job is present at a tick while it holds an allocation on one of
// the node's GPUs or has a process on one; it ended at the first tick that
// finds neither (the accountant has by then added the samples its last
// processes left). Not safe for concurrent use: the Recorder serialises.
type Tracker struct {
	node string
	jobs map[string]*job

	// What the previous tick's running totals were, per owner and per
	// allocation: each tick adds the increase since. The accountant starts
	// from zero when gpuwatch starts, and so do these, so figures restored
	// from a checkpoint go on from where they were.
	prevOwners map[snapshot.OwnerKey]ownerFigures
	prevAllocs map[allocID]allocFigures
	prevTime   time.Time
	// xids is each GPU's XID event count at the previous tick.
	xids map[string]uint64
	// idleEnergy is each whole GPU's idle energy (snapshot.Accounting.
	// IdleEnergy) at the previous tick.
	idleEnergy map[string]float64
	// ended are the jobs a Slurm epilog marked ended (see DefaultEpilogDir): their
	// allocations no longer keep them running.
	ended map[string]bool
	// done are jobs recorded on their end mark whose allocation Slurm
	// still lists: it must not start them again.
	done map[string]bool
	// listed is, per GPU UUID, the job holders of the processes its last
	// process list held. The accounting's reader lists a GPU's processes
	// only every few ticks (snapshot.Device.ProcessesNotListed): in
	// between, they still run.
	listed map[string][]holder
}

// holder is what makes a process's job present on a GPU or MIG instance:
// its Slurm job, pod and user there. A GPU's processes are kept as their
// distinct holders, in the order of their first process: one per job,
// not one per process, at every tick (a copy of each process's owner per
// tick was most of what a tick cost, with records on: bench/RESULTS.md).
type holder struct {
	key           string // jobKey's: "" for a process of no job
	slurm         snapshot.SlurmJob
	pod           snapshot.Pod
	user          string
	gpu           int
	uuid, migUUID string
}

type ownerFigures struct {
	seconds, sm, energy float64
}

type allocFigures struct {
	seconds, idle float64
}

type allocID struct {
	uuid, mig, namespace, pod, container, job, user string
}

// job is a running job's figures so far. It is what a checkpoint holds.
type job struct {
	Key      string         `json:"key"`
	Kind     string         `json:"kind"`
	Slurm    *SlurmIdentity `json:"slurm,omitempty"`
	Pod      *PodIdentity   `json:"pod,omitempty"`
	Start    time.Time      `json:"start"`
	LastSeen time.Time      `json:"last_seen"`
	GPUs     []*gpuFigures  `json:"gpus"`
	// Partial says why figures may be missing (Record.Partial).
	Partial string `json:"partial,omitempty"`
}

// gpuFigures are one job's sums on one GPU or MIG instance.
type gpuFigures struct {
	Index      int     `json:"index"`
	UUID       string  `json:"uuid"`
	MIGUUID    string  `json:"mig_uuid,omitempty"`
	Model      string  `json:"model,omitempty"`
	MIGProfile string  `json:"mig_profile,omitempty"`
	MemTotal   *uint64 `json:"memory_total_bytes,omitempty"`

	Allocated   float64 `json:"allocated_seconds"`
	HasAlloc    bool    `json:"has_allocation,omitempty"`
	Process     float64 `json:"process_seconds"`
	Idle        float64 `json:"idle_seconds"`
	HasIdle     bool    `json:"has_idle,omitempty"`
	SM          float64 `json:"sm_seconds"`
	HasSM       bool    `json:"has_sm,omitempty"`
	SMMax       float64 `json:"sm_max"`
	HasSMMax    bool    `json:"has_sm_max,omitempty"`
	MemMax      uint64  `json:"memory_max"`
	HasMem      bool    `json:"has_memory,omitempty"`
	Energy      float64 `json:"energy_joules"`
	HasEnergy   bool    `json:"has_energy,omitempty"`
	GPM         [4]mean `json:"gpm"` // SM active, occupancy, tensor, DRAM
	XIDs        uint64  `json:"xids"`
	HasXID      bool    `json:"has_xid,omitempty"`
	Throttle    float64 `json:"throttle_seconds"`
	HasThrottle bool    `json:"has_throttle,omitempty"`
}

// mean is a time-weighted mean in the making.
type mean struct {
	Sum    float64 `json:"sum"`
	Weight float64 `json:"weight"`
}

func (m *mean) add(v snapshot.Opt[float64], w float64) {
	if x, ok := v.Get(); ok && x == x && w > 0 {
		m.Sum += x * w
		m.Weight += w
	}
}

func (m mean) value() *float64 {
	if m.Weight <= 0 {
		return nil
	}
	return new(m.Sum / m.Weight)
}

// NewTracker returns a tracker whose records name node.
func NewTracker(node string) *Tracker {
	return &Tracker{
		node: node, jobs: map[string]*job{},
		prevOwners: map[snapshot.OwnerKey]ownerFigures{}, prevAllocs: map[allocID]allocFigures{},
		xids: map[string]uint64{}, idleEnergy: map[string]float64{}, done: map[string]bool{}, listed: map[string][]holder{},
	}
}

type gpuID struct{ uuid, mig string }

// Observe folds one accounting tick into the jobs' figures: s is the
// tick's enriched snapshot, acc the accountant's running totals after it
// (nil when there are none). It returns the records of the jobs that
// ended, ordered by ID.
func (t *Tracker) Observe(s *snapshot.Snapshot, acc *snapshot.Accounting) []Record {
	now := s.Time
	var dt float64
	if !t.prevTime.IsZero() && now.After(t.prevTime) {
		dt = now.Sub(t.prevTime).Seconds()
	}
	held, stillListed := t.presentJobs(s, now)
	smDelta := t.addTotals(acc, held)
	if dt > 0 {
		t.addDeviceFigures(s, held, smDelta, dt)
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		if n, ok := d.XIDEvents.Get(); ok && d.UUID != "" {
			t.xids[d.UUID] = n
		}
	}
	t.prevTime = now
	for key := range t.done {
		if !stillListed[key] {
			delete(t.done, key)
		}
	}
	var ended []Record
	for key, j := range t.jobs {
		if _, ok := held[key]; !ok {
			ended = append(ended, j.record(t.node, false))
			delete(t.jobs, key)
			if t.ended[key] && stillListed[key] {
				t.done[key] = true
			}
		}
	}
	slices.SortFunc(ended, func(a, b Record) int { return cmp.Compare(a.ID, b.ID) })
	return ended
}

// presentJobs finds or starts the jobs present at this tick, by their
// running processes and their allocations: held is, per job, the GPUs it
// holds or runs on; stillListed the jobs whose epilog ran that Slurm
// still lists.
func (t *Tracker) presentJobs(s *snapshot.Snapshot, now time.Time) (held map[string]map[gpuID]int, stillListed map[string]bool) {
	held, stillListed = map[string]map[gpuID]int{}, map[string]bool{}
	hold := func(key string, idx int, id gpuID) {
		if held[key] == nil {
			held[key] = map[gpuID]int{}
		}
		held[key][id] = idx
	}
	for _, holders := range t.runningHolders(s) {
		for i := range holders {
			h := &holders[i]
			if j := t.present(h.key, h.slurm, h.pod, h.user, now); j != nil {
				hold(j.Key, h.gpu, gpuID{h.uuid, h.migUUID})
			}
		}
	}
	for i := range s.Allocations {
		a := &s.Allocations[i]
		key := jobKey(a.Slurm.JobID, a.Pod.Namespace, a.Pod.Name)
		if t.ended[key] || t.done[key] {
			stillListed[key] = true
			continue // its epilog ran: Slurm lists it until the epilog is done
		}
		if j := t.present(key, a.Slurm, a.Pod, a.Slurm.User, now); j != nil {
			hold(j.Key, a.GPU, gpuID{uuidOf(s, a.GPUUUID, a.GPU), a.MIGUUID})
		}
	}
	return held, stillListed
}

// runningHolders are the holders of the processes running at this tick:
// those of the processes listed in s, then, on each GPU whose processes s
// did not list, those of its last list. A holder of several processes on
// one GPU comes once: present folds identical identities into the same
// job whatever their number, and the first of each comes in the same
// order.
func (t *Tracker) runningHolders(s *snapshot.Snapshot) [][]holder {
	out := make([][]holder, 0, len(s.Devices)+1)
	var listed []holder
	if len(s.Processes) > 0 {
		byGPU := map[string][]holder{}
		seen := map[holder]bool{}
		for i := range s.Processes {
			p := &s.Processes[i]
			h := holder{slurm: p.Owner.Slurm, pod: p.Owner.Pod, user: p.Owner.User, gpu: p.GPU, uuid: uuidOf(s, p.GPUUUID, p.GPU), migUUID: p.MIGUUID}
			if seen[h] {
				continue
			}
			seen[h] = true
			h.key = jobKey(h.slurm.JobID, h.pod.Namespace, h.pod.Name)
			listed = append(listed, h)
			byGPU[h.uuid] = append(byGPU[h.uuid], h)
		}
		for i := range s.Devices {
			if d := &s.Devices[i]; d.UUID != "" && !d.ProcessesNotListed && d.Up {
				t.listed[d.UUID] = byGPU[d.UUID]
			}
		}
		out = append(out, listed)
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		switch {
		case d.UUID == "":
		case d.ProcessesNotListed:
			out = append(out, t.listed[d.UUID])
		case d.Up && len(s.Processes) == 0:
			delete(t.listed, d.UUID) // listed with no process
		}
	}
	return out
}

// uuidOf is the UUID of a process's or allocation's GPU, looked up by
// index when it did not say.
func uuidOf(s *snapshot.Snapshot, uuid string, index int) string {
	if uuid != "" {
		return uuid
	}
	for i := range s.Devices {
		if s.Devices[i].Index == index {
			return s.Devices[i].UUID
		}
	}
	return ""
}

// present finds or starts the job of a Slurm job or pod seen now (key is
// jobKey's), and completes its identity; nil for an owner that is neither.
func (t *Tracker) present(key string, sj snapshot.SlurmJob, pod snapshot.Pod, user string, now time.Time) *job {
	if key == "" {
		return nil
	}
	j := t.jobs[key]
	if j == nil {
		j = &job{Key: key, Start: now}
		t.jobs[key] = j
	}
	if now.After(j.LastSeen) { // a clock stepped back (a restart of the simulator) keeps the later end
		j.LastSeen = now
	}
	if sj.JobID != "" {
		j.Kind = KindSlurm
		if j.Slurm == nil {
			j.Slurm = &SlurmIdentity{JobID: sj.JobID}
		}
		id := j.Slurm
		id.User = cmp.Or(id.User, sj.User, user)
		id.Account = cmp.Or(id.Account, sj.Account)
		id.Partition = cmp.Or(id.Partition, sj.Partition)
		id.JobName = cmp.Or(id.JobName, sj.JobName)
	} else {
		j.Kind = KindPod
		if j.Pod == nil {
			j.Pod = &PodIdentity{Namespace: pod.Namespace, Name: pod.Name}
		}
		j.Pod.UID = cmp.Or(j.Pod.UID, pod.UID)
	}
	return j
}

// jobKey names a job: a Slurm job by its ID, a pod by namespace and name.
func jobKey(slurmJob, namespace, pod string) string {
	switch {
	case slurmJob != "":
		return "slurm/" + slurmJob
	case pod != "":
		return "pod/" + namespace + "/" + pod
	}
	return ""
}

// addTotals adds the increase of the accountant's totals since the
// previous tick to the jobs present now, and returns each job's SM-second
// increase per GPU.
func (t *Tracker) addTotals(acc *snapshot.Accounting, held map[string]map[gpuID]int) map[string]map[gpuID]float64 {
	smDelta := map[string]map[gpuID]float64{}
	if acc == nil {
		return smDelta
	}
	ran := t.addOwnerTotals(acc, held, smDelta)
	allocs := t.addAllocTotals(acc)
	t.addIdleFigures(acc, allocs, ran, smDelta)
	return smDelta
}

// addOwnerTotals adds the increase of each owner's process seconds, SM
// seconds, energy and memory peak to its job's GPU, and each job's SM-second
// increase per GPU to smDelta. A GPU a job's processes left since the
// previous tick joins held. It returns, per job, the GPUs on which its
// processes ran in the interval.
func (t *Tracker) addOwnerTotals(acc *snapshot.Accounting, held map[string]map[gpuID]int, smDelta map[string]map[gpuID]float64) (ran map[string]map[gpuID]bool) {
	ran = map[string]map[gpuID]bool{}
	owners := make(map[snapshot.OwnerKey]ownerFigures, len(acc.Owners))
	for i := range acc.Owners {
		o := &acc.Owners[i]
		cur := ownerFigures{seconds: o.Seconds, sm: o.SMSeconds.Value, energy: o.EnergyJoules.Value}
		owners[o.Key] = cur
		key := jobKey(o.Key.SlurmJob, o.Key.Namespace, o.Key.Pod)
		j := t.jobs[key]
		if key == "" || j == nil {
			continue // not a job, or one that ended: its totals linger in the accountant a while
		}
		prev, ok := t.prevOwners[o.Key]
		if !ok || cur.seconds < prev.seconds {
			prev = ownerFigures{} // new since the previous tick, or the accountant forgot it and started again
		}
		id := gpuID{o.Key.GPUUUID, o.Key.MIGUUID}
		if _, ok := held[key][id]; !ok && held[key] != nil {
			held[key][id] = o.Key.GPU // its processes there ended since the previous tick
		}
		g := j.gpu(o.Key.GPU, id)
		g.Process += cur.seconds - prev.seconds
		if cur.seconds > prev.seconds {
			if ran[key] == nil {
				ran[key] = map[gpuID]bool{}
			}
			ran[key][id] = true
		}
		if o.SMSeconds.Valid {
			g.HasSM = true
			d := max(0, cur.sm-prev.sm)
			g.SM += d
			if smDelta[key] == nil {
				smDelta[key] = map[gpuID]float64{}
			}
			smDelta[key][id] += d
		}
		if o.EnergyJoules.Valid {
			g.HasEnergy = true
			g.Energy += max(0, cur.energy-prev.energy)
		}
		if m, ok := o.MemoryBytesMax.Get(); ok {
			g.HasMem = true
			g.MemMax = max(g.MemMax, m)
		}
	}
	t.prevOwners = owners
	return ran
}

// allocTick is one job's allocation of one GPU in one interval.
type allocTick struct {
	index         int
	seconds, idle float64
	hasIdle       bool
}

// addAllocTotals adds the increase of each job's allocated and idle
// seconds per GPU, and returns those increases.
func (t *Tracker) addAllocTotals(acc *snapshot.Accounting) map[string]map[gpuID]*allocTick {
	allocs := make(map[allocID]allocFigures, len(acc.Allocations))
	tick := map[string]map[gpuID]*allocTick{}
	for i := range acc.Allocations {
		a := &acc.Allocations[i]
		aid := allocID{a.GPUUUID, a.MIGUUID, a.Namespace, a.Pod, a.Container, a.SlurmJob, a.User}
		cur := allocFigures{seconds: a.Seconds, idle: a.IdleSeconds.Value}
		allocs[aid] = cur
		key := jobKey(a.SlurmJob, a.Namespace, a.Pod)
		j := t.jobs[key]
		if key == "" || j == nil {
			continue
		}
		prev, ok := t.prevAllocs[aid]
		if !ok || cur.seconds < prev.seconds {
			prev = allocFigures{}
		}
		id := gpuID{a.GPUUUID, a.MIGUUID}
		if tick[key] == nil {
			tick[key] = map[gpuID]*allocTick{}
		}
		at := tick[key][id]
		if at == nil {
			at = &allocTick{index: a.GPU}
			tick[key][id] = at
		}
		// A pod's containers are allocations of their own; the pod held
		// the GPU while any of them did, so the longest counts.
		at.seconds = max(at.seconds, cur.seconds-prev.seconds)
		if a.IdleSeconds.Valid {
			at.hasIdle = true
			at.idle = max(at.idle, cur.idle-prev.idle)
		}
	}
	for key, gpus := range tick {
		for id, at := range gpus {
			g := t.jobs[key].gpu(at.index, id)
			g.HasAlloc = true
			g.Allocated += at.seconds
			if at.hasIdle {
				g.HasIdle = true
				g.Idle += max(0, at.idle)
			}
		}
	}
	t.prevAllocs = allocs
	return tick
}

// addIdleFigures gives the jobs that held a GPU in the interval without
// running on it (allocs without ran) what that GPU did for them: no SM
// time, known as 0 where the allocation's idle time was measured, and the
// increase of the GPU's idle energy, split equally among them. A GPU's
// idle energy is the energy of the intervals in which no process held it,
// so a job whose processes ran gets its share through its owners instead.
// The idle energy of a MIG GPU is its unheld instances' together, which
// no one instance's holder can claim: MIG instances get none.
func (t *Tracker) addIdleFigures(acc *snapshot.Accounting, allocs map[string]map[gpuID]*allocTick, ran map[string]map[gpuID]bool, smDelta map[string]map[gpuID]float64) {
	idleHolders := map[string][]string{} // GPU UUID → jobs holding it whole, idle
	for key, gpus := range allocs {
		for id, at := range gpus {
			if at.seconds <= 0 || ran[key][id] {
				continue
			}
			if at.hasIdle {
				t.jobs[key].gpu(at.index, id).HasSM = true
				if smDelta[key] == nil {
					smDelta[key] = map[gpuID]float64{}
				}
				if _, ok := smDelta[key][id]; !ok {
					smDelta[key][id] = 0 // an idle interval's utilization, for the highest
				}
			}
			if id.mig == "" {
				idleHolders[id.uuid] = append(idleHolders[id.uuid], key)
			}
		}
	}
	energy := make(map[string]float64, len(acc.IdleEnergy))
	for i := range acc.IdleEnergy {
		e := &acc.IdleEnergy[i]
		energy[e.GPUUUID] = e.Joules
		prev, seen := t.idleEnergy[e.GPUUUID]
		keys := idleHolders[e.GPUUUID]
		if !seen || e.Joules < prev || len(keys) == 0 {
			continue // a baseline, or the accountant forgot the GPU and started again
		}
		share := (e.Joules - prev) / float64(len(keys))
		for _, key := range keys {
			g := t.jobs[key].gpu(e.GPU, gpuID{uuid: e.GPUUUID})
			g.HasEnergy = true
			g.Energy += share
		}
	}
	t.idleEnergy = energy
}

// addDeviceFigures adds what the GPUs themselves report over the interval
// dt to the jobs on them: GPM means, throttled time, XIDs, the highest
// interval's SM utilization, and the GPU's description.
func (t *Tracker) addDeviceFigures(s *snapshot.Snapshot, held map[string]map[gpuID]int, smDelta map[string]map[gpuID]float64, dt float64) {
	devs := make(map[string]*snapshot.Device, len(s.Devices))
	for i := range s.Devices {
		devs[s.Devices[i].UUID] = &s.Devices[i]
	}
	for key, gpus := range held {
		j := t.jobs[key]
		for id, idx := range gpus {
			g := j.gpu(idx, id)
			if d, ok := smDelta[key][id]; ok {
				u := min(1, d/dt)
				if !g.HasSMMax || u > g.SMMax {
					g.SMMax, g.HasSMMax = u, true
				}
			}
			d := devs[id.uuid]
			if d == nil || !d.Up {
				continue
			}
			g.Model = cmp.Or(g.Model, d.Info.Name)
			gpm := &d.GPM
			total := d.Memory.Total
			if id.mig != "" {
				gpm, total = nil, snapshot.Opt[uint64]{}
				for k := range d.MIGInstances {
					if m := &d.MIGInstances[k]; m.UUID == id.mig {
						gpm, total = &m.GPM, m.MemoryTotal
						g.MIGProfile = cmp.Or(g.MIGProfile, m.Profile)
					}
				}
			}
			if v, ok := total.Get(); ok && g.MemTotal == nil {
				g.MemTotal = new(v)
			}
			if gpm != nil {
				g.GPM[0].add(gpm.SMActive, dt)
				g.GPM[1].add(gpm.SMOccupancy, dt)
				g.GPM[2].add(gpm.TensorActive, dt)
				g.GPM[3].add(gpm.DRAMActive, dt)
			}
			if d.ClockEvents != nil {
				g.HasThrottle = true
				if throttled(d.ClockEvents) {
					g.Throttle += dt
				}
			}
			if n, ok := d.XIDEvents.Get(); ok {
				g.HasXID = true
				if prev, seen := t.xids[d.UUID]; seen && n > prev {
					g.XIDs += n - prev
				}
			}
		}
	}
}

// throttled says whether a reason that slows a busy GPU was active: any
// but the GPU being idle or running at the clocks an administrator set.
func throttled(events []snapshot.ClockEvent) bool {
	for _, e := range events {
		if e.Active && e.Reason != "gpu_idle" && e.Reason != "applications_clocks_setting" {
			return true
		}
	}
	return false
}

func (j *job) gpu(index int, id gpuID) *gpuFigures {
	for _, g := range j.GPUs {
		if g.UUID == id.uuid && g.MIGUUID == id.mig {
			return g
		}
	}
	g := &gpuFigures{Index: index, UUID: id.uuid, MIGUUID: id.mig}
	j.GPUs = append(j.GPUs, g)
	slices.SortFunc(j.GPUs, func(a, b *gpuFigures) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.MIGUUID, b.MIGUUID))
	})
	return g
}

// record turns a job's figures into its record.
func (j *job) record(node string, running bool) Record {
	r := Record{Kind: j.Kind, Node: node, Start: j.Start, End: j.LastSeen, Running: running, Partial: j.Partial, GPUs: make([]GPU, 0, len(j.GPUs))}
	if j.Slurm != nil {
		s := *j.Slurm
		r.Slurm, r.ID = &s, s.JobID
	}
	if j.Pod != nil {
		p := *j.Pod
		r.Pod, r.ID = &p, cmp.Or(p.UID, p.Namespace+"/"+p.Name)
	}
	for _, g := range j.GPUs {
		r.GPUs = append(r.GPUs, g.record())
	}
	return r
}

func (g *gpuFigures) record() GPU {
	out := GPU{
		Index: g.Index, UUID: g.UUID, Model: g.Model, MIGUUID: g.MIGUUID, MIGProfile: g.MIGProfile,
		MemoryTotalBytes: g.MemTotal, ProcessSeconds: g.Process, AllocatedSeconds: g.Process,
	}
	if g.HasAlloc {
		out.AllocatedSeconds = max(g.Allocated, g.Process)
	}
	if g.HasIdle {
		out.IdleSeconds = new(g.Idle)
	}
	if g.HasSM {
		out.SMSeconds = new(g.SM)
		if out.AllocatedSeconds > 0 {
			out.SMUtilizationMean = new(min(1, g.SM/out.AllocatedSeconds))
		}
	}
	if g.HasSMMax {
		out.SMUtilizationMax = new(g.SMMax)
	}
	if g.HasMem {
		out.MemoryUsedBytesMax = new(g.MemMax)
	}
	if g.HasEnergy {
		out.EnergyJoules = new(g.Energy)
	}
	if m := (GPMMeans{SMActive: g.GPM[0].value(), SMOccupancy: g.GPM[1].value(), TensorActive: g.GPM[2].value(), DRAMActive: g.GPM[3].value()}); m != (GPMMeans{}) {
		out.GPM = &m
	}
	if g.HasXID {
		out.XIDErrors = new(g.XIDs)
	}
	if g.HasThrottle {
		out.ThrottleSeconds = new(g.Throttle)
	}
	return out
}

// Running returns the records of the jobs running now, ordered by ID.
func (t *Tracker) Running() []Record {
	out := make([]Record, 0, len(t.jobs))
	for _, j := range t.jobs {
		out = append(out, j.record(t.node, true))
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
