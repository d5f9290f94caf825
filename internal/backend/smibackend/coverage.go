package smibackend

import (
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Fullest is the snapshot of a host whose nvidia-smi gives every property
// this backend asks for, of one GPU running one process: rendered by an
// output, it shows what the output can say with this backend. Every value
// is the first of a few plausible answers that its field accepts.
func Fullest() *snapshot.Snapshot {
	r := row{d: &snapshot.Device{Up: true}}
	all := query{missing: map[string][]string{}}
	groups := map[string]bool{}
	for _, g := range snapshot.AllGroups {
		groups[g] = true
	}
	for _, f := range gpuFields {
		for _, v := range []string{"1", "Enabled", "Active", "Yes", "P0"} {
			if f.set(&r, v) == nil {
				break
			}
		}
		all.fields = append(all.fields, f)
		all.names = append(all.names, f.names[0])
	}
	r.d.UUID = "GPU-00000000-0000-0000-0000-000000000000"
	r.finish()
	statuses := map[string]snapshot.GroupStatus{}
	for _, g := range snapshot.AllGroups {
		statuses[g] = snapshot.GroupStatus{Duration: time.Millisecond}
	}
	return &snapshot.Snapshot{
		Time: time.Unix(0, 0), DriverVersion: r.driver, Devices: []snapshot.Device{*r.d}, Groups: statuses,
		Driver:          snapshot.Driver{Version: r.driver, Branch: branch(r.driver), Library: "nvidia-smi", Limits: limits(all, groups)},
		ReadingsDropped: map[string]uint64{"power.draw": 1},
		Processes: []snapshot.Process{{GPU: r.d.Index, GPUUUID: r.d.UUID, PID: 1, Type: "compute",
			UsedMemory: snapshot.Some(uint64(1) << 20)}},
	}
}
