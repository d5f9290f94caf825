package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SlurmCluster is a private multi-node Slurm on this one machine: a
// controller and compute nodes, each a set of Linux namespaces (network,
// UTS, mount, PID, cgroup) on a private bridge with its own munged and
// slurmd (or slurmctld). Nodes use proctrack/cgroup on a cgroup v1 freezer
// subtree of their own, and a private /dev whose /dev/nvidiaN character
// devices back the gres File= lines, as on a GPU node.
//
// Ports live in the nodes' own network namespaces and every file under Dir,
// so a cluster runs beside the single-node one of StartSlurm, a host Slurm,
// and the clusters of other test processes (each takes a host-wide index
// that names its bridge, namespaces and subnet).
type SlurmCluster struct {
	Dir        string // every file of the cluster lives here
	Conf       string // its slurm.conf; commands run through Node.Command get SLURM_CONF
	Controller *SlurmNode
	Nodes      []*SlurmNode // compute nodes node1, node2, ...
	Name       string       // Slurm's ClusterName (the accounting database's cluster)
	opts       SlurmClusterOptions
	index      int // host-wide; names the bridge, namespaces and subnet
}

// SlurmClusterOptions are what StartSlurmClusterWith adds to the plain
// cluster of StartSlurmCluster.
type SlurmClusterOptions struct {
	// Accounting runs slurmdbd on the controller, storing into a private
	// MariaDB there (its data under the controller's directory, its socket
	// and port inside the controller's namespaces), and sets
	// AccountingStorageType=accounting_storage/slurmdbd: sacct and
	// sacctmgr work, as on a production cluster. It costs a few seconds
	// of start-up, so only the tests that need it ask for it.
	Accounting bool
	// Accounts are added to the accounting database with root as their
	// user (needs Accounting).
	Accounts []string
	// Conf returns lines appended to slurm.conf (Epilog=..., say); it is
	// called once Dir and Conf are known.
	Conf func(c *SlurmCluster) string
}

// SlurmNode is one node of a SlurmCluster.
type SlurmNode struct {
	Name    string // host name inside the node, Slurm's NodeName
	Addr    string // its address on the cluster's bridge; the test process reaches it
	Dir     string // its own files: logs, spool, munge socket
	cluster *SlurmCluster
	unshare *exec.Cmd // holds the namespaces; killing it ends the node
	pid     int       // the node's PID 1, as this host sees it
}

// Ports inside the nodes' network namespaces: nothing else listens there.
const (
	clusterCtldPort   = 16917
	clusterSlurmdPort = 16918
	clusterDbdPort    = 16919
)

// StartSlurmCluster starts a controller and nodes compute nodes with
// gpusPerNode h100 GPUs each, and tears everything down when the test ends.
// Under -short it skips; a missing tool skips, or fails under CI=true.
func StartSlurmCluster(t *testing.T, nodes, gpusPerNode int) *SlurmCluster {
	t.Helper()
	return StartSlurmClusterWith(t, nodes, gpusPerNode, SlurmClusterOptions{})
}

// StartSlurmClusterWith is StartSlurmCluster with options: slurmdbd and
// its database, slurm.conf lines of the test's.
func StartSlurmClusterWith(t *testing.T, nodes, gpusPerNode int, opts SlurmClusterOptions) *SlurmCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: real multi-node Slurm not started")
	}
	for _, tool := range []struct{ bin, pkg string }{
		{"munged", "munge"}, {"slurmctld", "slurm-wlm"}, {"slurmd", "slurm-wlm"}, {"sinfo", "slurm-wlm"},
		{"ip", "iproute2"}, {"nsenter", "util-linux"}, {"unshare", "util-linux"}, {"mknod", "coreutils"},
	} {
		RequireTool(t, tool.bin, tool.pkg)
	}
	if opts.Accounting {
		for _, tool := range []struct{ bin, pkg string }{
			{"slurmdbd", "slurmdbd"}, {"sacctmgr", "slurm-client"}, {"sacct", "slurm-client"},
			{"mariadbd", "mariadb-server"}, {"mariadb-install-db", "mariadb-server"},
		} {
			RequireTool(t, tool.bin, tool.pkg)
		}
	} else if len(opts.Accounts) > 0 {
		t.Fatal("StartSlurmClusterWith: Accounts need Accounting")
	}
	if os.Geteuid() != 0 {
		Missing(t, "a multi-node Slurm needs root (network namespaces, mounts, slurmd)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/freezer/cgroup.procs"); err != nil {
		Missing(t, "a multi-node Slurm needs the cgroup v1 freezer hierarchy at /sys/fs/cgroup/freezer for proctrack/cgroup")
	}
	if nodes < 1 || gpusPerNode < 1 {
		t.Fatalf("StartSlurmCluster(%d nodes, %d GPUs per node): need at least one of each", nodes, gpusPerNode)
	}

	c := &SlurmCluster{index: lockClusterIndex(t), opts: opts}
	c.Name = fmt.Sprintf("gpuwatch-multi%d", c.index)
	c.Dir = t.TempDir()
	// munged refuses a socket directory that others can write to, and
	// jobs of other users must reach their output directory.
	must(t, os.Chmod(c.Dir, 0o755))
	c.Conf = filepath.Join(c.Dir, "slurm.conf")
	c.Controller = c.newNode("ctl", 2)
	for i := 1; i <= nodes; i++ {
		c.Nodes = append(c.Nodes, c.newNode("node"+strconv.Itoa(i), 10+i))
	}
	c.removeLeftovers()
	t.Cleanup(func() { c.stop(t) })
	c.writeFiles(t, gpusPerNode)
	c.startNetwork(t)
	if opts.Accounting {
		c.initDatabase(t)
	}
	c.Controller.start(t, "ctl", gpusPerNode)
	for _, n := range c.Nodes {
		n.start(t, "node", gpusPerNode)
	}
	c.waitIdle(t, 60*time.Second)
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (c *SlurmCluster) newNode(name string, host int) *SlurmNode {
	return &SlurmNode{
		Name: name, Addr: fmt.Sprintf("%s.%d", c.subnet(), host),
		Dir: filepath.Join(c.Dir, "nodes", name), cluster: c,
	}
}

// subnet is the cluster's private /24, without its last byte.
func (c *SlurmCluster) subnet() string { return fmt.Sprintf("10.254.%d", c.index) }

func (c *SlurmCluster) bridge() string { return fmt.Sprintf("gwsc%d", c.index) }

func (c *SlurmCluster) netns(n *SlurmNode) string { return fmt.Sprintf("gwsc%d-%s", c.index, n.Name) }

// veth names the host end of a node's link (at most 15 bytes).
func (c *SlurmCluster) veth(n *SlurmNode) string { return fmt.Sprintf("gwsc%dh%s", c.index, n.Name) }

func (c *SlurmCluster) all() []*SlurmNode { return append([]*SlurmNode{c.Controller}, c.Nodes...) }

// freezer is the cluster's cgroup v1 freezer subtree on the host; each
// node's cgroup namespace is rooted in a child of it.
func (c *SlurmCluster) freezer() string {
	return fmt.Sprintf("/sys/fs/cgroup/freezer/gpuwatch-test-slurm%d", c.index)
}

// lockClusterIndex takes a host-wide index for this test's cluster.
func lockClusterIndex(t *testing.T) int {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "gpuwatch-test-slurmcluster")
	must(t, os.MkdirAll(dir, 0o777))
	for i := range 200 {
		f, ok := lockPort(dir, i) // a lock file per index, as for ports
		if ok {
			t.Cleanup(func() { f.Close() })
			return i
		}
	}
	t.Fatal("no free multi-node Slurm index in 0-199")
	return 0
}

func (c *SlurmCluster) writeFiles(t *testing.T, gpus int) {
	t.Helper()
	key, err := os.ReadFile("/etc/munge/munge.key")
	if err != nil {
		key = make([]byte, 128)
		f, err := os.Open("/dev/urandom")
		must(t, err)
		_, err = f.Read(key)
		f.Close()
		must(t, err)
	}
	must(t, os.WriteFile(filepath.Join(c.Dir, "munge.key"), key, 0o600))
	must(t, os.Mkdir(filepath.Join(c.Dir, "node"), 0o755)) // each node mounts its own directory here
	must(t, os.Mkdir(filepath.Join(c.Dir, "ctld"), 0o755))

	var hosts strings.Builder
	hosts.WriteString("127.0.0.1 localhost\n")
	var names []string
	for _, n := range c.all() {
		for _, sub := range []string{"", "munge", "spool"} {
			must(t, os.MkdirAll(filepath.Join(n.Dir, sub), 0o755))
		}
		hosts.WriteString(n.Addr + " " + n.Name + "\n")
		if n != c.Controller {
			names = append(names, n.Name)
		}
	}
	must(t, os.WriteFile(filepath.Join(c.Dir, "hosts"), []byte(hosts.String()), 0o644))

	var conf strings.Builder
	fmt.Fprintf(&conf, `ClusterName=%s
SlurmctldHost=%s(%s)
SlurmctldPort=%d
SlurmdPort=%d
AuthType=auth/munge
AuthInfo=socket=%s/node/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=%[7]s
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
GresTypes=gpu
StateSaveLocation=%[6]s/ctld
SlurmdSpoolDir=%[6]s/node/spool
SlurmctldPidFile=%[6]s/node/slurmctld.pid
SlurmdPidFile=%[6]s/node/slurmd.pid
SlurmctldLogFile=%[6]s/node/slurmctld.log
SlurmdLogFile=%[6]s/node/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MinJobAge=300
`, c.Name, c.Controller.Name, c.Controller.Addr, clusterCtldPort, clusterSlurmdPort, c.Dir, c.accountingStorage())
	if c.opts.Accounting {
		// AccountingStoragePass is the munge socket for slurmdbd's
		// connections (AuthInfo is not read for them).
		fmt.Fprintf(&conf, "AccountingStorageHost=%s\nAccountingStoragePort=%d\nAccountingStoragePass=%s/node/munge/munge.sock\n",
			c.Controller.Name, clusterDbdPort, c.Dir)
		c.writeDbdConf(t)
	}
	if c.opts.Conf != nil {
		conf.WriteString(strings.TrimRight(c.opts.Conf(c), "\n") + "\n")
	}
	var gres strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&conf, "NodeName=%s NodeAddr=%s CPUs=2 RealMemory=2000 Gres=gpu:h100:%d State=UNKNOWN\n", n.Name, n.Addr, gpus)
		for i := range gpus {
			fmt.Fprintf(&gres, "NodeName=%s Name=gpu Type=h100 File=/dev/nvidia%d\n", n.Name, i)
		}
	}
	fmt.Fprintf(&conf, "PartitionName=gpu Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", strings.Join(names, ","))
	must(t, os.WriteFile(c.Conf, []byte(conf.String()), 0o644))
	must(t, os.WriteFile(filepath.Join(c.Dir, "gres.conf"), []byte(gres.String()), 0o644))
	must(t, os.WriteFile(filepath.Join(c.Dir, "cgroup.conf"), []byte("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\nConstrainDevices=no\n"), 0o644))
}

// startNetwork makes the bridge (with the host's address .1, so that the
// test reaches every node) and a network namespace with a veth per node.
func (c *SlurmCluster) startNetwork(t *testing.T) {
	t.Helper()
	br := c.bridge()
	ipCmd(t, "link", "add", br, "type", "bridge")
	ipCmd(t, "addr", "add", c.subnet()+".1/24", "dev", br)
	ipCmd(t, "link", "set", br, "up")
	for _, n := range c.all() {
		ns, host := c.netns(n), c.veth(n)
		ipCmd(t, "netns", "add", ns)
		ipCmd(t, "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
		ipCmd(t, "link", "set", host, "master", br, "up")
		ipCmd(t, "-n", ns, "addr", "add", n.Addr+"/24", "dev", "eth0")
		ipCmd(t, "-n", ns, "link", "set", "eth0", "up")
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	}
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// start runs node-init.sh as the PID 1 of the node's new namespaces. The
// shell before it moves itself into the node's freezer cgroup, so that
// the new cgroup namespace is rooted there.
func (n *SlurmNode) start(t *testing.T, role string, gpus int) {
	t.Helper()
	c := n.cluster
	cg := filepath.Join(c.freezer(), n.Name)
	must(t, os.MkdirAll(cg, 0o755))
	initScript := filepath.Join(RepoRoot(), "test", "slurm", "node-init.sh")
	n.unshare = exec.Command("sh", "-c", `echo $$ >"$1/cgroup.procs" && shift && exec "$@"`, "sh", cg,
		"nsenter", "--net=/run/netns/"+c.netns(n),
		"unshare", "--uts", "--mount", "--pid", "--cgroup", "--fork", "--kill-child", "--mount-proc", "--propagation", "private",
		"sh", initScript, role, n.Name, c.Dir, strconv.Itoa(gpus))
	out, err := os.Create(filepath.Join(n.Dir, "init.out"))
	must(t, err)
	defer out.Close()
	n.unshare.Stdout, n.unshare.Stderr = out, out
	must(t, n.unshare.Start())
	// The PID 1 is unshare's only child; once it has written "started",
	// the daemons have forked (a controller with accounting starts its
	// database and slurmdbd first).
	deadline := time.Now().Add(60 * time.Second)
	for {
		if n.pid == 0 {
			n.pid = childOf(n.unshare.Process.Pid)
		}
		if _, err := os.Stat(filepath.Join(n.Dir, "started")); err == nil && n.pid != 0 {
			return
		}
		if exited(n.unshare.Process.Pid) || time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(n.Dir, "init.out"))
			daemons, _ := os.ReadFile(filepath.Join(n.Dir, "daemons.out"))
			t.Fatalf("node %s did not start:\n%s\n%s", n.Name, log, daemons)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// childOf returns a child of process pid (0 when it has none yet).
func childOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	child, _ := strconv.Atoi(f[0])
	return child
}

// exited tells whether process pid has ended (or is a zombie).
func exited(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// waitIdle waits until every compute node is idle.
func (c *SlurmCluster) waitIdle(t *testing.T, within time.Duration) {
	t.Helper()
	want := len(c.Nodes)
	last := ""
	deadline := time.Now().Add(within)
	for {
		out, err := c.Controller.Output(context.Background(), "sinfo", "-h", "-N", "-o", "%N %T")
		last = strings.TrimSpace(string(out))
		if err == nil && strings.Count(last, " idle") == want && len(strings.Split(last, "\n")) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes not idle after %v: sinfo says %q (%v); logs under %s", within, last, err, c.Dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Command returns a command that runs name inside the node (all of its
// namespaces, with SLURM_CONF set). The process nsenter starts is its
// child; a caller that must stop it early uses StartProcess.
func (n *SlurmNode) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-a", "-t", strconv.Itoa(n.pid), "--", name}, args...)...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+n.cluster.Conf)
	return cmd
}

// Output runs name inside the node with a 30 s bound and returns its
// combined output.
func (n *SlurmNode) Output(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return n.Command(ctx, name, args...).CombinedOutput()
}

// Run runs name inside the node and returns its trimmed output, failing
// the test when it fails.
func (n *SlurmNode) Run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := n.Output(context.Background(), name, args...)
	if err != nil {
		t.Fatalf("%s on %s %s: %v\n%s", name, n.Name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// NodeProcess is a long-running process inside a node (gpuwatch).
type NodeProcess struct {
	Output *SyncBuffer // its stdout and stderr
	done   chan struct{}
	stop   func()
}

// Exited tells whether the process has ended.
func (p *NodeProcess) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop ends the process as the test's end would, and returns once it has
// ended; the later calls, and the test's end, do nothing more.
func (p *NodeProcess) Stop() { p.stop() }

// StartProcess starts name inside the node and stops it when the test
// ends (SIGTERM to the process itself, found as nsenter's child, then
// SIGKILL), logging its output if the test failed.
func (n *SlurmNode) StartProcess(t *testing.T, name string, args ...string) *NodeProcess {
	t.Helper()
	cmd := n.Command(context.Background(), name, args...)
	p := &NodeProcess{Output: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Output, p.Output
	must(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.done) }()
	p.stop = sync.OnceFunc(func() {
		// nsenter forks to enter the PID namespace and does not pass
		// signals on, so the signal goes to its child.
		target := cmd.Process
		if child := childOf(cmd.Process.Pid); child != 0 {
			if proc, err := os.FindProcess(child); err == nil {
				target = proc
			}
		}
		_ = target.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = target.Kill()
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("output of %s on %s:\n%s", name, n.Name, p.Output.String())
		}
	})
	return p
}

// Sbatch submits a job from the controller and returns its id; its output
// goes to Dir/job-ID.out.
func (c *SlurmCluster) Sbatch(t *testing.T, args ...string) string {
	t.Helper()
	base := []string{"--parsable", "-o", filepath.Join(c.Dir, "job-%j.out")}
	return c.Controller.Run(t, "sbatch", append(base, args...)...)
}

// JobState is the job's state as squeue prints it ("RUNNING"), or "" once
// squeue no longer knows it.
func (c *SlurmCluster) JobState(t *testing.T, id string) string {
	t.Helper()
	return c.Controller.Run(t, "squeue", "-h", "--states=all", "-j", id, "-o", "%T")
}

// stop ends every node (killing unshare kills its PID 1, and with it the
// node's PID namespace), then removes the namespaces, links, bridge and
// cgroups.
func (c *SlurmCluster) stop(t *testing.T) {
	for _, n := range c.all() {
		if n.unshare == nil || n.unshare.Process == nil {
			continue
		}
		_ = n.unshare.Process.Kill()
		_ = n.unshare.Wait()
	}
	// The kernel ends a PID namespace's processes asynchronously: wait
	// for the node's PID 1 to be gone before removing its cgroup.
	for _, n := range c.all() {
		for deadline := time.Now().Add(10 * time.Second); n.pid != 0 && !exited(n.pid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := c.removeLeftovers(); err != nil {
		t.Errorf("multi-node Slurm cleanup: %v", err)
	}
	if t.Failed() {
		for _, n := range c.all() {
			for _, f := range []string{"init.out", "daemons.out", "slurmd.log", "slurmctld.log", "slurmdbd.log", "mariadbd.log"} {
				if data, err := os.ReadFile(filepath.Join(n.Dir, f)); err == nil && len(data) > 0 {
					t.Logf("%s %s (tail):\n%s", n.Name, f, tail(string(data), 30))
				}
			}
		}
	}
}

// removeLeftovers removes the cluster's network namespaces (ending what a
// crashed run left in them), links, bridge and cgroups; what does not
// exist is skipped. It only ever touches names of this cluster's index,
// which this process holds.
func (c *SlurmCluster) removeLeftovers() error {
	var errs []error
	for _, n := range c.all() {
		ns := c.netns(n)
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
				for f := range strings.FieldsSeq(string(out)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = killPID(pid)
					}
				}
			}
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", ns, err, out))
			}
		}
		// Deleting the namespace deletes its end of the veth, and with it
		// (soon) the host's end.
		if linkExists(c.veth(n)) {
			if out, err := exec.Command("ip", "link", "del", c.veth(n)).CombinedOutput(); err != nil && linkExists(c.veth(n)) {
				errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", c.veth(n), err, out))
			}
		}
	}
	if linkExists(c.bridge()) {
		if out, err := exec.Command("ip", "link", "del", c.bridge()).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", c.bridge(), err, out))
		}
	}
	if err := removeCgroupTree(c.freezer()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

// removeCgroupTree removes a cgroup v1 directory and its children, deepest
// first (a cgroup directory is removed with rmdir, not unlink), retrying
// while the kernel finishes ending its processes.
func removeCgroupTree(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	var last error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if last = rmdirTree(dir); last == nil {
			return nil
		}
	}
	return fmt.Errorf("removing cgroup %s: %w", dir, last)
}

func rmdirTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := rmdirTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return syscall.Rmdir(dir)
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
