package jobs

import (
	"fmt"
	"slices"
	"strings"
)

// AdminCommentPrefix starts gpuwatch's part of a Slurm job's AdminComment.
const AdminCommentPrefix = "gpuwatch1:"

// AdminComment is the compact one-word summary the EpilogSlurmctld stores
// in the job's AdminComment, so that Slurm's accounting (sacct -o
// AdminComment, with slurmdbd) keeps it after Prometheus forgot:
//
//	gpuwatch1:gpus=2;alloc_s=7200;sm=34%;idle=50%;mem_max=3gib;energy_wh=610;xid=0;per_gpu=gpu01/0:sm83%:idle0%:mem60gib,gpu01/2:...
//
// Absent figures are left out, never written as 0. It holds no space, so
// another tool's text beside it stays whole, and no capital: Slurm 22.05's
// sacctmgr lowercases every value it sets, so what sacct keeps is the
// word as written.
func AdminComment(s Summary) string {
	var parts []string
	add := func(k, v string) { parts = append(parts, k+"="+v) }
	t := s.Total
	add("gpus", fmt.Sprint(t.GPUs))
	add("alloc_s", fmt.Sprintf("%.0f", t.AllocatedSeconds))
	if t.SMUtilizationMean != nil {
		add("sm", fmt.Sprintf("%.0f%%", 100**t.SMUtilizationMean))
	}
	if t.IdleSeconds != nil && t.AllocatedSeconds > 0 {
		add("idle", fmt.Sprintf("%.0f%%", 100**t.IdleSeconds/t.AllocatedSeconds))
	}
	if t.MemoryUsedBytesMax != nil {
		add("mem_max", strings.ReplaceAll(Bytes(*t.MemoryUsedBytesMax), " ", ""))
	}
	if t.EnergyJoules != nil {
		add("energy_wh", fmt.Sprintf("%.0f", *t.EnergyJoules/3600))
	}
	if t.XIDErrors != nil {
		add("xid", fmt.Sprint(*t.XIDErrors))
	}
	var gpus []string
	for _, g := range s.GPUs {
		x := fmt.Sprintf("%s/%d", g.Node, g.Index)
		if g.MIGProfile != "" {
			x += "/" + g.MIGProfile
		}
		if g.SMUtilizationMean != nil {
			x += fmt.Sprintf(":sm%.0f%%", 100**g.SMUtilizationMean)
		}
		if g.IdleSeconds != nil && g.AllocatedSeconds > 0 {
			x += fmt.Sprintf(":idle%.0f%%", 100**g.IdleSeconds/g.AllocatedSeconds)
		}
		if g.MemoryUsedBytesMax != nil {
			x += ":mem" + strings.ReplaceAll(Bytes(*g.MemoryUsedBytesMax), " ", "")
		}
		gpus = append(gpus, x)
	}
	if len(gpus) > 0 {
		add("per_gpu", strings.Join(gpus, ","))
	}
	if len(s.MissingNodes) > 0 {
		add("missing_nodes", fmt.Sprint(len(s.MissingNodes)))
	}
	return strings.ToLower(strings.ReplaceAll(AdminCommentPrefix+strings.Join(parts, ";"), " ", "_"))
}

// MergeAdminComment keeps what other tools (jobstats' "JS1:...") wrote in
// an AdminComment and puts ours after it, replacing an earlier one of
// ours.
func MergeAdminComment(existing, ours string) string {
	var kept []string
	for w := range strings.SplitSeq(existing, " ") {
		if !strings.HasPrefix(w, AdminCommentPrefix) {
			kept = append(kept, w)
		}
	}
	rest := strings.TrimRight(strings.Join(kept, " "), " ")
	if rest == "" {
		return ours
	}
	return rest + " " + ours
}

// CombineAdminComments joins two copies of a job's AdminComment: the
// controller's (what a running job has; Slurm 22.05's controller hears
// nothing of sacctmgr updates) and the accounting database's (where
// another EpilogSlurmctld, jobstats' say, may have stored its text after
// the job ended, lowercased by sacctmgr). The words of the copy about to
// be rewritten (first) come as they are, then the other's that it lacks,
// compared without case.
func CombineAdminComments(first, other string) string {
	words := strings.Fields(first)
	for w := range strings.FieldsSeq(other) {
		if !slices.ContainsFunc(words, func(x string) bool { return strings.EqualFold(x, w) }) {
			words = append(words, w)
		}
	}
	return strings.Join(words, " ")
}

// scontrolAfterAdminComment are the keys `scontrol show job -o` prints
// after AdminComment (Slurm 22.05 to 24.x): its value runs up to one of
// them.
var scontrolAfterAdminComment = []string{"StdErr", "StdIn", "StdOut", "Power", "Comment", "MailUser", "MailType", "TresPerNode", "TresPerJob", "CpusPerTres", "MemPerTres", "TresBind", "TresFreq", "NtasksPerTRES", "Reservation", "Features"}

// AdminCommentOf finds the AdminComment in one `scontrol show job -o` line
// ("" when the job has none).
func AdminCommentOf(line string) string {
	_, after, ok := strings.Cut(line, " AdminComment=")
	if !ok {
		return ""
	}
	end := len(after)
	for _, k := range scontrolAfterAdminComment {
		if i := strings.Index(after, " "+k+"="); i >= 0 && i < end {
			end = i
		}
	}
	return strings.TrimRight(after[:end], " \n")
}
