package doctor

import (
	"fmt"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/jobs"
)

// checkJournal: the accounting directory can hold the job journal (owner
// and modes as serve demands), nothing blocks its files, and no record
// waits to be written.
func checkJournal(env Env) []Result {
	const check = "job journal"
	if env.AccountingDir == "" {
		return []Result{skip(check, "job records are off with these flags")}
	}
	dir := env.AccountingDir
	d := jobs.Diagnose(dir)
	var out []Result
	switch {
	case d.Untrusted != nil:
		out = append(out, fail(check, d.Untrusted.Error(),
			"the accounting directory and its parents must belong to gpuwatch's user or root and be writable by no one else (the unit's StateDirectory= makes /var/lib/gpuwatch 0750 gpuwatch:gpuwatch)", true))
	case d.Missing:
		out = append(out, ok(check, dir+" does not exist yet: gpuwatch serve creates it (0750)"))
	default:
		out = append(out, ok(check, dir+": owner and modes fit"))
	}
	if len(d.Obstacles) > 0 {
		out = append(out, fail(check, fmt.Sprintf("%s holds %s, which is not a regular file: reading skips it and rotation stops at it", dir, strings.Join(d.Obstacles, ", ")),
			"move it out of the accounting directory; gpuwatch retries the rotation at the next record", true))
	}
	if d.Pending > 0 {
		out = append(out, fail(check, fmt.Sprintf("%d ended jobs' records wait in the checkpoint: gpuwatch could not write them to the journal (gpuwatch_journal_write_errors_total, and the log, say why)", d.Pending),
			"free space in "+dir+" or remove what the log names; they are written at the next accounting tick", true))
	}
	if len(d.CorruptKept) > 0 {
		out = append(out, skip(check, fmt.Sprintf("unreadable checkpoints were moved aside and kept: %s (the jobs they held have records marked partial); remove them once inspected", strings.Join(d.CorruptKept, ", "))))
	}
	return out
}
