package jobs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// AdminCommentStore stores a summary in a Slurm job's AdminComment.
type AdminCommentStore struct {
	Run      slurm.CommandRunner
	Scontrol string // scontrol's path; sacct and sacctmgr are looked for beside it
}

// Store puts the summary in the job's AdminComment, after what other
// tools wrote there, and returns the comment stored. A job that has not
// ended takes it in the controller (scontrol update), which keeps its case
// and hands it to the accounting database at the end. An ended job (the
// EpilogSlurmctld's case: Slurm refuses to update it in the controller)
// takes it only in the accounting database (sacctmgr, with slurmdbd), and
// sacctmgr lowercases every value it sets: another tool's text with
// capitals in it would be damaged, so then nothing is stored and the
// error says why.
func (a AdminCommentStore) Store(ctx context.Context, id string, s Summary) (string, error) {
	// Both copies: another tool's EpilogSlurmctld may have stored its text
	// in the database, which the controller does not hear of.
	var inController, inDatabase string
	if out, err := a.Run.Run(ctx, a.Scontrol, "show", "job", "-o", id); err == nil {
		inController = AdminCommentOf(string(out))
	}
	if out, err := a.Run.Run(ctx, a.near("sacct"), "-n", "-X", "-P", "-j", id, "-o", "AdminComment"); err == nil {
		// A requeued job has a line per run: the last is this one's.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		inDatabase = lines[len(lines)-1]
	}
	ours := AdminComment(s)
	comment := MergeAdminComment(CombineAdminComments(inController, inDatabase), ours)
	_, ctlErr := a.Run.Run(ctx, a.Scontrol, "update", "JobId="+id, "AdminComment="+comment)
	if ctlErr == nil {
		return comment, nil
	}
	comment = MergeAdminComment(CombineAdminComments(inDatabase, inController), ours)
	if strings.ToLower(comment) != comment {
		return "", fmt.Errorf("storing the AdminComment: scontrol: %v; sacctmgr: not tried: it lowercases what it sets, and the comment holds other text with capitals (%q) that it would damage: the summary stays in the nodes' records (gpuwatch job %s)", ctlErr, comment, id)
	}
	if _, err := a.Run.Run(ctx, a.near("sacctmgr"), "-i", "update", "job", "where", "jobid="+id, "set", "AdminComment="+comment); err != nil {
		return "", errors.New("storing the AdminComment: scontrol: " + ctlErr.Error() + "; sacctmgr: " + err.Error())
	}
	return comment, nil
}

// near is a Slurm command beside scontrol (same directory), or on PATH.
func (a AdminCommentStore) near(name string) string {
	if dir := filepath.Dir(a.Scontrol); dir != "." {
		return filepath.Join(dir, name)
	}
	return name
}
