package accounting

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// AfterTick has Run call f after each tick it integrated, on Run's
// goroutine, with the tick's enriched snapshot and the totals after it
// (as Totals: without the new-owner hold). The job records
// (internal/jobs) are kept this way: the later stage learns which owners
// ended from the snapshot and their totals from the accountant. Call it
// before Run.
func (a *Accountant) AfterTick(f func(s *snapshot.Snapshot, totals *snapshot.Accounting)) {
	a.afterTick = f
}
