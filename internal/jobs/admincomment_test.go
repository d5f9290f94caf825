package jobs

import (
	"strings"
	"testing"
)

func TestAdminComment(t *testing.T) {
	s, _ := Summarize("77", twoNodeRecords())
	got := AdminComment(s)
	want := "gpuwatch1:gpus=3;alloc_s=10800;sm=45%;mem_max=60gib;per_gpu=gpu01/0:sm83%:idle0%:mem60gib,gpu01/2:sm1%:idle97%:mem3gib,gpu02/0:sm50%"
	if got != want {
		t.Errorf("AdminComment:\n got %s\nwant %s", got, want)
	}
	if strings.ContainsAny(got, " \n") {
		t.Errorf("AdminComment has a space: %q", got)
	}
	// jobstats' part stays, ours replaces ours.
	for _, c := range []struct{ existing, want string }{
		{"", "gpuwatch1:new"},
		{"JS1:H4sIAAAA==", "JS1:H4sIAAAA== gpuwatch1:new"},
		{"JS1:H4sIAAAA== gpuwatch1:old", "JS1:H4sIAAAA== gpuwatch1:new"},
		{"gpuwatch1:old note by admin", "note by admin gpuwatch1:new"},
	} {
		if got := MergeAdminComment(c.existing, "gpuwatch1:new"); got != c.want {
			t.Errorf("MergeAdminComment(%q) = %q, want %q", c.existing, got, c.want)
		}
	}
	// The copy to be rewritten as it is, then what the other has beyond it.
	for _, c := range []struct{ controller, database, want string }{
		{"", "", ""},
		{"JS1:AbC=", "", "JS1:AbC="},
		{"", "js1:abc=", "js1:abc="},
		{"JS1:AbC=", "js1:abc=", "JS1:AbC="},
		{"JS1:AbC=", "js1:abc= site:ok", "JS1:AbC= site:ok"},
		{"JS1:AbC=", "site:ok", "JS1:AbC= site:ok"},
		{"JS1:AbC= gpuwatch1:old", "js1:abc= gpuwatch1:old", "JS1:AbC= gpuwatch1:old"},
		{"js1:abc= site:ok", "JS1:AbC= note", "js1:abc= site:ok note"},
	} {
		if got := CombineAdminComments(c.controller, c.database); got != c.want {
			t.Errorf("CombineAdminComments(%q, %q) = %q, want %q", c.controller, c.database, got, c.want)
		}
	}
	// As Slurm 22.05 prints it (the real cluster test reads it too).
	line := "JobId=5 JobName=wrap WorkDir=/tmp AdminComment=JS1:abc+/= gpuwatch1:gpus=1;sm=3%  StdErr=/tmp/o StdIn=/dev/null StdOut=/tmp/o Power= TresPerNode=gres:gpu:1\n"
	if got := AdminCommentOf(line); got != "JS1:abc+/= gpuwatch1:gpus=1;sm=3%" {
		t.Errorf("AdminCommentOf = %q", got)
	}
	if got := AdminCommentOf("JobId=5 WorkDir=/tmp StdErr=/tmp/o\n"); got != "" {
		t.Errorf("no AdminComment: %q", got)
	}
}
