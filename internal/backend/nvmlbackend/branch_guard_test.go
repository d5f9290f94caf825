//go:build cgo

package nvmlbackend

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
)

// On every driver branch the reader calls only what the branch's
// libnvidia-ml.so.1 exports. The simulator's guard (sim.Library with a
// driver: key) panics on any other call, as a real process would die; the
// reader recovers panics per group, so the guard's record is what is
// checked. dgx-h100 exercises MIG, GPM per instance, NVLink, processes and
// XID events.
func TestReaderCallsOnlyWhatTheBranchExports(t *testing.T) {
	for _, b := range nvmlbranch.Branches() {
		t.Run(b.Name, func(t *testing.T) {
			s := newSim(t, sim.Config{Profile: "dgx-h100", Driver: b.Name,
				Faults: []sim.Fault{{GPU: 2, XID: 79, At: durationPtr(0)}}}, time.Hour)
			r := newReaderWith(t, s.Library(), Options{Groups: AllGroups(), Now: s.Now})
			for range 3 {
				s.SetElapsed(s.Elapsed() + 2*time.Second) // past GPM's minimum window
				read(t, r)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if missing := s.MissingFunctionCalls(); len(missing) > 0 {
				t.Errorf("on %s the reader called functions the library lacks: %v", b.Name, missing)
			}
		})
	}
}
