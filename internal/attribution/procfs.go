package attribution

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/prometheus/procfs"
)

// Bounds on what is read from a process. A command line can be megabytes
// long (and is attacker-controlled); a label value must not be.
const (
	maxCommandBytes = 256
	maxCgroupBytes  = 64 << 10
	maxEnvironBytes = 256 << 10
)

// procFacts is what procfs says about one process. It does not change for
// the life of the process (a process can change its cgroup, but GPU
// processes practically never do; the facts are re-read when the cache
// entry is revalidated).
type procFacts struct {
	StartTime uint64 // ticks since boot, /proc/PID/stat field 22
	UID       string // real uid, decimal
	Comm      string
	// Command is the executable's base name, or with
	// procReader.fullCommandLines the whole cmdline (NUL → space, at most
	// maxCommandBytes).
	Command string
	Cgroup  CgroupInfo
	// SlurmJobID/Step come from SLURM_JOB_ID/SLURM_STEP_ID in the
	// environment, for clusters whose proctrack plugin makes no cgroups.
	EnvSlurmJobID, EnvSlurmStep string
}

// procReader reads processes under a procfs mount point (--path.procfs).
type procReader struct {
	root string
	fs   procfs.FS
	// fullCommandLines reads /proc/PID/cmdline, every argument included.
	// Off, cmdline is never read: arguments often carry secrets (tokens,
	// passwords, paths) that no output may show unless the operator asked.
	fullCommandLines bool
	// inFlight holds the PIDs being read; a read stuck in the kernel
	// stays in it until the kernel lets it go (procjob.go).
	inFlight readsInFlight
}

func newProcReader(root string) (*procReader, error) {
	fsys, err := procfs.NewFS(root)
	if err != nil {
		return nil, fmt.Errorf("procfs %s: %w", root, err)
	}
	return &procReader{root: root, fs: fsys}, nil
}

// errProcGone reports that the process does not exist (any more).
var errProcGone = errors.New("process not found")

// startTime reads only the start time, the check that a cached PID is
// still the same process. It runs for every cached process once per
// revalidation interval, so it reads the one field itself rather than
// having procfs parse all fifty-two.
func (r *procReader) startTime(pid int) (uint64, error) {
	b, err := r.readBounded(pid, "stat", 4096)
	if err != nil {
		return 0, err
	}
	return parseStartTime(b)
}

// parseStartTime finds field 22 of /proc/PID/stat. The command name (field
// 2) is in parentheses and may itself contain spaces and parentheses, so
// fields are counted from the last ')'.
func parseStartTime(stat []byte) (uint64, error) {
	r := bytes.LastIndexByte(stat, ')')
	if r < 0 {
		return 0, fmt.Errorf("stat: no command name")
	}
	fields := bytes.Fields(stat[r+1:])
	const startTimeField = 22 - 3 // fields after "pid (comm)", 0-based
	if len(fields) <= startTimeField {
		return 0, fmt.Errorf("stat: %d fields, want at least 22", len(fields)+2)
	}
	v, err := strconv.ParseUint(string(fields[startTimeField]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat field 22 (starttime): %w", err)
	}
	return v, nil
}

func (r *procReader) stat(pid int) (st procfs.ProcStat, err error) {
	p, err := r.fs.Proc(pid)
	if err != nil {
		return st, r.wrap(pid, "", err)
	}
	err = parseSafely(func() error { st, err = p.Stat(); return err })
	return st, r.wrap(pid, "stat", err)
}

// read gathers everything procfs knows about pid. When the process exits
// half-way, the facts read so far are returned together with the error, so
// the caller can keep what it has.
func (r *procReader) read(pid int) (procFacts, error) {
	var f procFacts
	st, err := r.stat(pid)
	if err != nil {
		return f, err
	}
	f.StartTime = st.Starttime
	f.Comm = cleanLabel([]byte(st.Comm), maxCommandBytes)

	p, err := r.fs.Proc(pid)
	if err != nil {
		return f, r.wrap(pid, "", err)
	}
	var status procfs.ProcStatus
	err = parseSafely(func() error { status, err = p.NewStatus(); return err })
	if err != nil {
		return f, r.wrap(pid, "status", err)
	}
	f.UID = strconv.FormatUint(status.UIDs[0], 10)

	if r.fullCommandLines {
		cmdline, err := r.readBounded(pid, "cmdline", maxCommandBytes+utf8.UTFMax)
		if err != nil {
			return f, err
		}
		f.Command = commandLine(cmdline)
	} else {
		f.Command = r.executableName(pid)
	}

	cg, err := r.readBounded(pid, "cgroup", maxCgroupBytes)
	if err != nil {
		return f, err
	}
	f.Cgroup = ParseCgroup(string(cg))

	// The environment is read only when the cgroups named no owner: it is
	// the one way to find the Slurm job with proctrack/linuxproc, and
	// reading it for every process would be needless.
	if f.Cgroup.ContainerID == "" && f.Cgroup.SlurmJobID == "" {
		env, err := r.readBounded(pid, "environ", maxEnvironBytes)
		if err != nil && !errors.Is(err, fs.ErrPermission) {
			return f, err
		}
		f.EnvSlurmJobID, f.EnvSlurmStep = slurmFromEnviron(env)
	}
	return f, nil
}

func (r *procReader) readBounded(pid int, name string, limit int64) ([]byte, error) {
	file, err := os.Open(filepath.Join(r.root, strconv.Itoa(pid), name))
	if err != nil {
		return nil, r.wrap(pid, name, err)
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, limit))
	return b, r.wrap(pid, name, err)
}

// wrap names the file in an error and folds "no such process" into
// errProcGone, which is how a process that exits between two reads shows.
func (r *procReader) wrap(pid int, name string, err error) error {
	if err == nil {
		return nil
	}
	path := filepath.Join(r.root, strconv.Itoa(pid), name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: %w", path, errProcGone)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// parseSafely runs a procfs parser. procfs trusts that its files were
// written by the kernel and can index out of range on a malformed one, but
// --path.procfs may point at any tree; a bad file must be an error, not a
// crash of the exporter.
func parseSafely(parse func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("malformed file: %v", v)
		}
	}()
	return parse()
}

// executableName is the base name of the file the process executes, from
// the /proc/PID/exe link, which the process cannot rewrite (unlike argv[0],
// which setproctitle and the like turn into a whole command line). The
// link is unreadable without ptrace rights over the process and absent for
// kernel threads; "" then, and the caller falls back to comm, the kernel's
// name for the process (also an executable's base name, at most 15 bytes).
func (r *procReader) executableName(pid int) string {
	target, err := os.Readlink(filepath.Join(r.root, strconv.Itoa(pid), "exe"))
	if err != nil {
		return ""
	}
	// A binary replaced since it started (an upgrade) reads "PATH (deleted)".
	target = strings.TrimSuffix(target, " (deleted)")
	name := filepath.Base(target)
	if name == "." || name == "/" {
		return ""
	}
	return cleanLabel([]byte(name), maxCommandBytes)
}

// commandLine turns /proc/PID/cmdline (arguments separated and ended by
// NUL) into one line of at most maxCommandBytes.
func commandLine(raw []byte) string {
	raw = bytes.TrimRight(raw, "\x00")
	raw = bytes.ReplaceAll(raw, []byte{0}, []byte{' '})
	return cleanLabel(raw, maxCommandBytes)
}

// cleanLabel cuts b to at most limit bytes without splitting a character,
// and replaces invalid UTF-8 (a command line is arbitrary bytes), which a
// Prometheus label value cannot hold. Quotes, newlines and the like are
// kept: escaping is the output's job.
func cleanLabel(b []byte, limit int) string {
	if len(b) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		b = b[:cut]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// slurmFromEnviron finds SLURM_JOB_ID and SLURM_STEP_ID in the content of
// /proc/PID/environ.
func slurmFromEnviron(env []byte) (job, step string) {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("SLURM_JOB_ID=")); ok && isDecimal(string(v)) {
			job = string(v)
		} else if v, ok := bytes.CutPrefix(kv, []byte("SLURM_STEP_ID=")); ok {
			step = stepName(string(v))
		}
	}
	if job == "" {
		step = ""
	}
	return job, step
}

// stepName maps SLURM_STEP_ID to the name the cgroup path uses. Slurm
// (20.11 and later, slurm.h) numbers its special steps from the top of the
// uint32 range.
func stepName(v string) string {
	switch v {
	case "4294967291": // SLURM_BATCH_SCRIPT 0xfffffffb
		return "batch"
	case "4294967292": // SLURM_EXTERN_CONT 0xfffffffc
		return "extern"
	case "4294967290": // SLURM_INTERACTIVE_STEP 0xfffffffa
		return "interactive"
	}
	if isDecimal(v) {
		return v
	}
	return ""
}
