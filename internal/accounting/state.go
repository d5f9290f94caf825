package accounting

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// state is the running totals and what the next tick needs of this one.
type state struct {
	started bool
	last    time.Time // snapshot time of the last tick integrated

	owners map[snapshot.OwnerKey]*snapshot.OwnerTotal
	// ownersGen counts the expiries that removed owner totals: a total
	// cached by a listed owner (listedOwner.total) is valid while it
	// holds.
	ownersGen uint64
	// oldestSeen is the oldest LastSeen of the totals at expire's last
	// pass; zero when there were none.
	oldestSeen time.Time
	allocs     map[allocKey]*snapshot.AllocationTotal
	idle       map[string]*snapshot.DeviceEnergy // by GPU UUID
	devs       map[string]*deviceTrack           // by GPU UUID
	// byUUID is the scratch of a tick's devices.
	byUUID map[string]*deviceTick
	// devProcs is the scratch of a tick's processes by device, allocSeen
	// of its allocations.
	devProcs  deviceProcesses
	allocSeen map[allocKey]bool

	// ownerOrder and allocOrder are the totals sorted by their labels,
	// rebuilt only when one is added or removed: the outputs see a stable
	// order without a sort per tick.
	ownerOrder []*snapshot.OwnerTotal
	allocOrder []*snapshot.AllocationTotal
	reorder    bool
}

// deviceTrack is what one GPU's previous tick left for the next.
type deviceTrack struct {
	energy    float64 // the energy counter, joules
	hasEnergy bool
	// list is the last process list's owners, which held the GPU at every
	// tick until the next list; before is the list before it, whose PIDs
	// still name the owners of samples left by processes ended since;
	// spare is reused by the next list.
	list, before, spare ownerList
	// tick is the scratch of each tick's figures.
	tick deviceTick
	// period is the driver's sample period, learnt as the smallest gap
	// between two samples of one process; 0 until one has been seen.
	period time.Duration
	// buffered: the driver has given several samples of one process in
	// one read (every buffered sample, not one per process).
	buffered bool
	// newest is the newest sample time (µs) read so far: the reader's
	// next lastSeenTimestamp.
	newest uint64
	// servedAgain is the time (seconds) since the last read of new
	// samples during which the GPU was served its last reading again.
	servedAgain float64
	// lists counts the process lists taken (track), to tell which list
	// an owner kept in a process's slot is from.
	lists uint64
	// sums is smFromSamples': this read's samples per process, and each
	// process's newest sample time of the last read.
	sums pidSums
}

// allocKey identifies an allocation total: its labels.
type allocKey struct {
	uuid, mig                           string
	namespace, pod, container, job, usr string
	gpu                                 int
}

func newState() state {
	return state{
		owners: map[snapshot.OwnerKey]*snapshot.OwnerTotal{},
		allocs: map[allocKey]*snapshot.AllocationTotal{},
		idle:   map[string]*snapshot.DeviceEnergy{},
		devs:   map[string]*deviceTrack{},
		byUUID: map[string]*deviceTick{},
	}
}

// listedTotal is listed owner o's running total, made if need be.
func (st *state) listedTotal(o *listedOwner, now time.Time) *snapshot.OwnerTotal {
	if o.total == nil || o.totalGen != st.ownersGen {
		o.total, o.totalGen = st.owner(o.key, now), st.ownersGen
	}
	return o.total
}

func (st *state) owner(k snapshot.OwnerKey, now time.Time) *snapshot.OwnerTotal {
	t := st.owners[k]
	if t == nil {
		t = &snapshot.OwnerTotal{Key: k, FirstSeen: now, LastSeen: now}
		st.owners[k] = t
		st.reorder = true
	}
	return t
}

// expire drops the totals of owners and allocations not seen for longer
// than retention. A pass over them all is made only once the oldest
// LastSeen of the last pass is older than retention: LastSeen only grows,
// and totals made since are newer (they start at their tick's time).
func (st *state) expire(now time.Time, retention time.Duration) {
	if !st.oldestSeen.IsZero() && now.Sub(st.oldestSeen) <= retention {
		return
	}
	var oldest time.Time
	keep := func(seen time.Time) bool {
		if now.Sub(seen) > retention {
			return false
		}
		if oldest.IsZero() || seen.Before(oldest) {
			oldest = seen
		}
		return true
	}
	for k, t := range st.owners {
		if !keep(t.LastSeen) {
			delete(st.owners, k)
			st.reorder = true
			st.ownersGen++
		}
	}
	for k, t := range st.allocs {
		if !keep(t.LastSeen) {
			delete(st.allocs, k)
			st.reorder = true
		}
	}
	st.oldestSeen = oldest
}

// sortOrders rebuilds the sorted orders after totals came or went.
func (st *state) sortOrders() {
	if !st.reorder {
		return
	}
	st.reorder = false
	st.ownerOrder = st.ownerOrder[:0]
	for _, t := range st.owners {
		st.ownerOrder = append(st.ownerOrder, t)
	}
	slices.SortFunc(st.ownerOrder, func(x, y *snapshot.OwnerTotal) int { return compareOwnerKeys(&x.Key, &y.Key) })
	st.allocOrder = st.allocOrder[:0]
	for _, t := range st.allocs {
		st.allocOrder = append(st.allocOrder, t)
	}
	slices.SortFunc(st.allocOrder, func(x, y *snapshot.AllocationTotal) int { return compareAllocations(x, y) })
}

// view copies the totals for outputs. Totals first seen less than hold
// before now read 0 (see DefaultNewOwnerHold), keeping which figures are
// present.
func (st *state) view(now time.Time, hold time.Duration) *snapshot.Accounting {
	acc := &snapshot.Accounting{
		Time:        now,
		Owners:      make([]snapshot.OwnerTotal, 0, len(st.owners)),
		Allocations: make([]snapshot.AllocationTotal, 0, len(st.allocs)),
		IdleEnergy:  make([]snapshot.DeviceEnergy, 0, len(st.idle)),
	}
	st.sortOrders()
	for _, t := range st.ownerOrder {
		c := *t
		if now.Sub(c.FirstSeen) < hold {
			c.Seconds = 0
			c.SMSeconds.Value, c.MemoryByteSeconds.Value, c.EnergyJoules.Value = 0, 0, 0
		}
		acc.Owners = append(acc.Owners, c)
	}
	for _, t := range st.allocOrder {
		c := *t
		if now.Sub(c.FirstSeen) < hold {
			c.Seconds, c.IdleSeconds.Value = 0, 0
		}
		acc.Allocations = append(acc.Allocations, c)
	}
	for _, e := range st.idle {
		acc.IdleEnergy = append(acc.IdleEnergy, *e)
	}
	slices.SortFunc(acc.IdleEnergy, func(x, y snapshot.DeviceEnergy) int { return x.GPU - y.GPU })
	return acc
}

func compareOwnerKeys(x, y *snapshot.OwnerKey) int {
	if c := cmp.Compare(x.GPU, y.GPU); c != 0 {
		return c
	}
	return cmp.Or(
		cmp.Compare(x.GPUUUID, y.GPUUUID), cmp.Compare(x.MIGUUID, y.MIGUUID),
		cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Pod, y.Pod), cmp.Compare(x.SlurmJob, y.SlurmJob),
		cmp.Compare(x.User, y.User), cmp.Compare(x.Container, y.Container),
		cmp.Compare(x.ComposeProject, y.ComposeProject), cmp.Compare(x.ComposeService, y.ComposeService),
	)
}

func compareAllocations(x, y *snapshot.AllocationTotal) int {
	return cmp.Or(
		cmp.Compare(x.GPU, y.GPU), cmp.Compare(x.GPUUUID, y.GPUUUID), cmp.Compare(x.MIGUUID, y.MIGUUID),
		cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Pod, y.Pod), cmp.Compare(x.Container, y.Container),
		cmp.Compare(x.SlurmJob, y.SlurmJob), cmp.Compare(x.User, y.User),
	)
}
