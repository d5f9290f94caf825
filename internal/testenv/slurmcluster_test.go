package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSlurmClusterRunsAMultiNodeJobAndCleansUp starts a controller and two
// nodes with accounting (slurmdbd over MariaDB), runs a 2-node job whose
// tasks report their host and cgroup, finds it in sacct, and checks that
// nothing of the cluster, its database included, is left after cleanup.
func TestSlurmClusterRunsAMultiNodeJobAndCleansUp(t *testing.T) {
	var c *SlurmCluster
	t.Run("cluster", func(t *testing.T) {
		c = StartSlurmClusterWith(t, 2, 2, SlurmClusterOptions{Accounting: true, Accounts: []string{"physics"}})
		out := filepath.Join(c.Dir, "tasks")
		if err := os.Mkdir(out, 0o777); err != nil {
			t.Fatal(err)
		}
		id := c.Sbatch(t, "-N2", "--gres=gpu:1", "-A", "physics", "--wrap",
			"srun -N2 --ntasks-per-node=1 sh -c 'cat /proc/self/cgroup > "+out+"/$(hostname); ls /dev/nvidia* >> "+out+"/$(hostname)'")
		WaitFor(t, 60*time.Second, "job "+id+" to complete", func() bool {
			return c.JobState(t, id) == "COMPLETED"
		})
		for _, n := range c.Nodes {
			data, err := os.ReadFile(filepath.Join(out, n.Name))
			if err != nil {
				t.Fatalf("task on %s wrote nothing: %v", n.Name, err)
			}
			if want := "freezer:/slurm_" + n.Name + "/uid_0/job_" + id + "/step_0"; !strings.Contains(string(data), want) {
				t.Errorf("task on %s: cgroup\n%s\nwant %s", n.Name, data, want)
			}
			if !strings.Contains(string(data), "/dev/nvidia1") {
				t.Errorf("task on %s does not see the node's GPU devices:\n%s", n.Name, data)
			}
		}
		// slurmctld sends the job to slurmdbd, which stores it in MariaDB.
		Eventually(t, 30*time.Second, func() error {
			want := "physics|COMPLETED|node[1-2]|" + c.Name
			if got := c.Controller.Run(t, "sacct", "-j", id, "-X", "-n", "-P", "-o", "Account,State,NodeList,Cluster"); got != want {
				return fmt.Errorf("sacct -j %s: %q, want %q", id, got, want)
			}
			return nil
		})
	})
	if c == nil {
		return
	}
	for _, n := range c.all() {
		if _, err := os.Stat("/run/netns/" + c.netns(n)); err == nil {
			t.Errorf("network namespace %s left behind", c.netns(n))
		}
		if linkExists(c.veth(n)) {
			t.Errorf("link %s left behind", c.veth(n))
		}
		if n.pid != 0 && !exited(n.pid) {
			t.Errorf("PID 1 of %s (%d) still runs", n.Name, n.pid)
		}
	}
	// munged, slurmctld, slurmd and mariadbd name a file of the cluster's
	// on their command lines (slurmdbd, started bare, shares the
	// controller's PID namespace with them).
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if cmd, err := os.ReadFile(f); err == nil && strings.Contains(string(cmd), c.Dir) {
			t.Errorf("%s still runs: %q", filepath.Dir(f), strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	if linkExists(c.bridge()) {
		t.Errorf("bridge %s left behind", c.bridge())
	}
	if _, err := os.Stat(c.freezer()); err == nil {
		t.Errorf("cgroup %s left behind", c.freezer())
	}
}
