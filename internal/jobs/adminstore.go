package jobs

import (
	"context"
	"encoding/json"
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
	var inDatabase string
	inController, err := a.controllerComment(ctx, id)
	if err != nil {
		return "", err
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

// controllerComment is the job's AdminComment in the controller ("" when
// the controller does not know the job). It is read from squeue's JSON,
// where a job name or comment holding " AdminComment=" cannot pass for
// it; where squeue has no --json, from `scontrol show job -o`, refusing a
// line where the key shows more than once (whose it is cannot be told).
func (a AdminCommentStore) controllerComment(ctx context.Context, id string) (string, error) {
	if out, err := a.Run.Run(ctx, a.near("squeue"), "--json", "--states=all", "-j", id); err == nil {
		if c, ok, err := AdminCommentFromSqueueJSON(out, id); err == nil {
			if !ok {
				return "", nil
			}
			return c, nil
		}
	}
	out, err := a.Run.Run(ctx, a.Scontrol, "show", "job", "-o", id)
	if err != nil {
		return "", nil // an ended job the controller forgot: the database's copy stands
	}
	if n := strings.Count(string(out), " AdminComment="); n > 1 {
		return "", fmt.Errorf("scontrol show job %s shows \"AdminComment=\" %d times (the job's name or comment holds it too), and this Slurm's squeue has no --json to tell which is the job's: the AdminComment was not changed", id, n)
	}
	return AdminCommentOf(string(out)), nil
}

// AdminCommentFromSqueueJSON finds job id's admin_comment in `squeue
// --json`; ok is false when the job is not listed.
func AdminCommentFromSqueueJSON(data []byte, id string) (comment string, ok bool, err error) {
	var doc struct {
		Jobs []struct {
			JobID        json.Number `json:"job_id"`
			AdminComment *string     `json:"admin_comment"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return "", false, fmt.Errorf("squeue --json: %w", err)
	}
	for _, j := range doc.Jobs {
		if j.JobID.String() != id {
			continue
		}
		if j.AdminComment == nil {
			return "", false, errors.New("squeue --json lists no admin_comment")
		}
		return *j.AdminComment, true, nil
	}
	return "", false, nil
}

// near is a Slurm command beside scontrol (same directory), or on PATH.
func (a AdminCommentStore) near(name string) string {
	if dir := filepath.Dir(a.Scontrol); dir != "." {
		return filepath.Join(dir, name)
	}
	return name
}
