//go:build cgo

package jobs

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// bigRecord is a record over a tmpfs page (4 KiB), so that appending it
// to a full file system writes part of it and then fails.
func bigRecord(i int) Record {
	r := testRecord(i)
	r.Slurm.JobName = strings.Repeat("x", 6000)
	return r
}

// checkWholeLines fails unless the journal file ends with a newline and
// every line of it is a record.
func checkWholeLines(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s ends with a partial line (%d bytes after the last newline)", path, len(data)-1-bytes.LastIndexByte(data, '\n'))
	}
}

// On a full disk a failed append leaves no partial line; once space
// returns, the same record is written whole, on its own line.
func TestJournalFullDiskLeavesNoPartialLine(t *testing.T) {
	fs := testenv.SmallTmpfs(t, "64k")
	dir := filepath.Join(fs, "acct")
	j, err := OpenJournal(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 2 {
		if err := j.Append(bigRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	fill := testenv.FillDisk(t, fs)
	for range 3 { // and again: each failure cuts back
		if err := j.Append(bigRecord(2)); err == nil {
			t.Fatal("an append on a full disk succeeded")
		}
		checkWholeLines(t, filepath.Join(dir, JournalName))
	}
	if st := j.Stats(); st.WriteErrors != 3 {
		t.Errorf("%d write errors counted, want 3", st.WriteErrors)
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 4; i++ {
		if err := j.Append(bigRecord(i)); err != nil {
			t.Fatalf("after space returned: %v", err)
		}
	}
	recs, skipped, err := ReadJournal(dir)
	if err != nil || skipped != 0 || len(recs) != 4 {
		t.Fatalf("%d records, %d skipped, %v; want 4 whole records", len(recs), skipped, err)
	}
	for i, r := range recs {
		if r.ID != strconv.Itoa(i) {
			t.Errorf("record %d is job %s", i, r.ID)
		}
	}
}

// A record that cannot be written on a full disk stays pending (counted,
// served by the API) and is written at the first tick after space
// returned.
func TestRecorderRetriesRecordsAfterAFullDisk(t *testing.T) {
	fs := testenv.SmallTmpfs(t, "64k")
	r := jobRig(t, Options{Dir: filepath.Join(fs, "acct"), CheckpointInterval: 10 * time.Second})
	r.run(step, 40*time.Second)
	fill := testenv.FillDisk(t, fs)
	r.run(step, 56*time.Second) // the pod ended at 50 s
	pending := func(want string) {
		t.Helper()
		if err := testutil.CollectAndCompare(r.rec, strings.NewReader("# HELP gpuwatch_journal_pending_records "+Metrics[1].Help+
			"\n# TYPE gpuwatch_journal_pending_records gauge\ngpuwatch_journal_pending_records "+want+"\n"), "gpuwatch_journal_pending_records"); err != nil {
			t.Error(err)
		}
	}
	pending("1")
	if n := testutil.ToFloat64(prometheusOne(r.rec, "gpuwatch_journal_write_errors_total")); n < 1 {
		t.Errorf("gpuwatch_journal_write_errors_total %v, want at least 1", n)
	}
	w := httptest.NewRecorder()
	Handler(r.rec, APIOptions{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/jobs", nil))
	var list ListDoc
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatalf("/api/v1/jobs: %v %s", err, w.Body)
	}
	if rec, ok := findKind(list.Records, KindPod); !ok || rec.Running {
		t.Errorf("the pending pod record is not served: %s", w.Body)
	}
	checkWholeLines(t, filepath.Join(r.dir, JournalName))
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	r.run(step, 60*time.Second)
	pending("0")
	journal, skipped, err := ReadJournal(r.dir)
	if err != nil || skipped != 0 || len(journal) != 1 || journal[0].Kind != KindPod {
		t.Fatalf("after space returned: %+v, %d skipped, %v", journal, skipped, err)
	}
	if n := testutil.CollectAndCount(r.rec, "gpuwatch_journal_last_write_timestamp_seconds"); n != 1 {
		t.Errorf("no time of the last good write")
	}
}

func findKind(recs []Record, kind string) (Record, bool) {
	for _, r := range recs {
		if r.Kind == kind {
			return r, true
		}
	}
	return Record{}, false
}

// A directory where a rotated file should be fails the rotation, not the
// journal: records keep being written, the failure is exported, the lock
// stays held, and the rotation goes through once the obstacle is gone.
func TestJournalRotationObstacle(t *testing.T) {
	dir := t.TempDir()
	const maxBytes = 4096
	j, err := OpenJournal(dir, maxBytes, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	obstacle := filepath.Join(dir, JournalName+".1")
	if err := os.MkdirAll(filepath.Join(obstacle, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; n < 20; n++ {
		if err := j.Append(testRecord(n)); err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
	}
	st := j.Stats()
	if st.RotateErr == nil || !strings.Contains(st.RotateErr.Error(), JournalName+".1 is not a regular file") || st.WriteErrors == 0 {
		t.Fatalf("stats with an obstacle: %+v", st)
	}
	if j2, err := OpenJournal(dir, maxBytes, 3); err == nil {
		_ = j2.Close()
		t.Fatal("a second writer opened the directory after a failed rotation")
	}
	read, err := ReadJournalReport(dir)
	if err != nil || len(read.Records) != n || len(read.Warnings) != 1 {
		t.Fatalf("reading beside the obstacle: %d records, warnings %q, %v", len(read.Records), read.Warnings, err)
	}
	if err := os.RemoveAll(obstacle); err != nil {
		t.Fatal(err)
	}
	for ; n < 25; n++ {
		if err := j.Append(testRecord(n)); err != nil {
			t.Fatal(err)
		}
	}
	if st := j.Stats(); st.RotateErr != nil {
		t.Fatalf("the rotation was not retried: %v", st.RotateErr)
	}
	if info, err := os.Stat(obstacle); err != nil || !info.Mode().IsRegular() {
		t.Fatalf("no rotated file after the obstacle went: %v", err)
	}
	if j2, err := OpenJournal(dir, maxBytes, 3); err == nil {
		_ = j2.Close()
		t.Fatal("a second writer opened the directory after a rotation")
	}
	recs, skipped, err := ReadJournal(dir)
	if err != nil || skipped != 0 || len(recs) != n || recs[n-1].ID != strconv.Itoa(n-1) {
		t.Fatalf("after the rotation: %d records, %d skipped, %v", len(recs), skipped, err)
	}
}

// The accounting directory must belong to gpuwatch's user (or root) and be
// writable by no one else, as sshd's StrictModes asks of ~/.ssh.
func TestJournalRefusesADirectoryOthersControl(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the directory's owner checks need root (to chown)")
	}
	for _, c := range []struct {
		name    string
		prepare func(dir string) error
		want    string
	}{
		{"owned by another user", func(dir string) error { return os.Chown(dir, 65534, 65534) }, "belongs to uid 65534"},
		{"writable by all", func(dir string) error { return os.Chmod(dir, 0o777) }, "chmod o-w"},
		{"writable by another group", func(dir string) error {
			return errorsJoin(os.Chown(dir, 0, 65534), os.Chmod(dir, 0o770))
		}, "chmod g-w"},
		{"parent writable by all", func(dir string) error { return os.Chmod(filepath.Dir(dir), 0o777) }, "a parent of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "acct")
			if err := os.Mkdir(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := c.prepare(dir); err != nil {
				t.Fatal(err)
			}
			j, err := OpenJournal(dir, 0, 0)
			if err == nil {
				_ = j.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q: want it to name %s and say %q", err, dir, c.want)
			}
		})
	}
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// A link planted in the directory by its (unprivileged) owner is never
// followed by a root gpuwatch: the directory is refused, and the root-owned
// target stays as it was. In a trusted directory a link where the journal
// should be is refused too; one where the checkpoint should be is moved
// aside, not followed.
func TestJournalNeverFollowsALink(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // for the other user to reach hostile/
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(base, "victim")
	const content = "root's file\nnot a record"
	if err := os.WriteFile(victim, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	unchanged := func() {
		t.Helper()
		if data, err := os.ReadFile(victim); err != nil || string(data) != content {
			t.Fatalf("the link's target changed: %q %v", data, err)
		}
	}
	// Another user's directory, a link planted by that user.
	hostile := filepath.Join(base, "hostile")
	if err := os.Mkdir(hostile, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(hostile, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	testenv.AsUser(t, 65534, "ln", "-s", victim, filepath.Join(hostile, JournalName))
	if _, err := Open(Options{Dir: hostile, Node: "n1"}); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("a directory another user owns: %v", err)
	}
	unchanged()

	// A trusted directory that holds a link anyway.
	dir := filepath.Join(base, "acct")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, JournalName)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, Node: "n1"}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a link at the journal's place: %v", err)
	}
	unchanged()
	if err := os.Remove(filepath.Join(dir, JournalName)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, CheckpointName)); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(Options{Dir: dir, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	unchanged()
	if info, err := os.Lstat(filepath.Join(dir, CheckpointName)); err != nil || !info.Mode().IsRegular() {
		t.Errorf("the checkpoint is not a regular file of its own: %v %v", info, err)
	}
}

// The journal and the checkpoint are 0640 whatever the umask (the
// packaged unit's is 0077), so the service's group can read them.
func TestJournalModesWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	r := jobRig(t, Options{})
	r.run(step, 56*time.Second)
	if err := r.rec.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{JournalName, CheckpointName} {
		info, err := os.Stat(filepath.Join(r.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != FileMode {
			t.Errorf("%s is %04o, want %04o", name, info.Mode().Perm(), FileMode)
		}
	}
}

// One line over MaxRecordBytes, or a directory where a rotated file
// should be, is skipped and counted, not the end of reading.
func TestReadJournalSkipsWhatIsNotARecord(t *testing.T) {
	dir := t.TempDir()
	line := func(i int) string {
		r := testRecord(i)
		data, _ := jsonLine(r)
		return data
	}
	long := `{"id":"x","kind":"slurm","slurm":{"job_name":"` + strings.Repeat("y", MaxRecordBytes) + `"}}` + "\n"
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write(JournalName+".3", line(0)+long+line(1))
	if err := os.MkdirAll(filepath.Join(dir, JournalName+".2", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(JournalName+".1", line(2)+line(2)) // a record written twice
	write(JournalName, line(3)+long)
	read, err := ReadJournalReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range read.Records {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "0,1,2,3" || read.Skipped != 2 || read.Duplicates != 1 || len(read.Warnings) != 1 {
		t.Errorf("read %v, %d skipped, %d duplicates, warnings %q; want 0..3, 2 skipped, 1 duplicate, one warning", ids, read.Skipped, read.Duplicates, read.Warnings)
	}
	for _, w := range read.Warnings {
		if strings.Contains(w, dir) {
			t.Errorf("warning %q names the absolute path", w)
		}
	}
}

// Lowering --accounting.journal-files removes the rotated files beyond it.
func TestFewerJournalFilesRemovesTheOlder(t *testing.T) {
	dir := t.TempDir()
	for n := 1; n <= 4; n++ {
		data, _ := jsonLine(testRecord(n))
		if err := os.WriteFile(filepath.Join(dir, rotatedName(n)), []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := Open(Options{Dir: dir, Node: "n1", JournalFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	for n := 1; n <= 4; n++ {
		_, err := os.Stat(filepath.Join(dir, rotatedName(n)))
		if kept := err == nil; kept != (n < 2) {
			t.Errorf("%s kept %v with 2 files", rotatedName(n), kept)
		}
	}
}

func jsonLine(r Record) (string, error) {
	data, err := json.Marshal(r)
	return string(data) + "\n", err
}

// oneMetric is the metric of c named name, as a collector of it alone.
type oneMetric struct {
	c    prometheus.Collector
	name string
}

func prometheusOne(c prometheus.Collector, name string) prometheus.Collector {
	return oneMetric{c, name}
}

func (o oneMetric) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(o, ch) }

func (o oneMetric) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { o.c.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+o.name+`"`) {
			ch <- m
		}
	}
}

// A record the journal refuses stays in the checkpoint: a restart keeps it
// pending, and it is written once the journal takes records again.
func TestPendingRecordsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	const maxBytes = 4096
	opts := Options{Dir: dir, JournalMaxBytes: maxBytes, JournalFiles: 3, CheckpointInterval: 10 * time.Second}
	// The current file is past twice its bound and cannot rotate.
	var full strings.Builder
	for i := 0; full.Len() <= rotationSlack*maxBytes; i++ {
		line, _ := jsonLine(testRecord(1000 + i))
		full.WriteString(line)
	}
	if err := os.WriteFile(filepath.Join(dir, JournalName), []byte(full.String()), 0o640); err != nil {
		t.Fatal(err)
	}
	obstacle := filepath.Join(dir, JournalName+".1")
	if err := os.MkdirAll(filepath.Join(obstacle, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := jobRig(t, opts)
	r.run(step, 56*time.Second) // the pod ended at 50 s
	if n := testutil.ToFloat64(prometheusOne(r.rec, "gpuwatch_journal_pending_records")); n != 1 {
		t.Fatalf("%v records pending, want the pod's", n)
	}
	if n := testutil.ToFloat64(prometheusOne(r.rec, "gpuwatch_journal_rotation_failing")); n != 1 {
		t.Errorf("gpuwatch_journal_rotation_failing %v, want 1", n)
	}
	r.crashAndRestart(opts)
	if n := testutil.ToFloat64(prometheusOne(r.rec, "gpuwatch_journal_pending_records")); n != 1 {
		t.Fatalf("after a restart %v records pending, want the pod's", n)
	}
	if err := os.RemoveAll(obstacle); err != nil {
		t.Fatal(err)
	}
	r.sim.SetElapsed(58 * time.Second)
	r.run(step, 60*time.Second)
	read, err := ReadJournalReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	pods := 0
	for _, rec := range read.Records {
		if rec.Kind == KindPod {
			pods++
		}
	}
	if pods != 1 || read.Duplicates != 0 || read.Skipped != 0 {
		t.Errorf("%d pod records, %d duplicates, %d skipped: want the pending one written once", pods, read.Duplicates, read.Skipped)
	}
	if n := testutil.ToFloat64(prometheusOne(r.rec, "gpuwatch_journal_pending_records")); n != 0 {
		t.Errorf("%v records still pending", n)
	}
}
