package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// CheckpointName is the running jobs' checkpoint in the accounting
// directory.
const CheckpointName = "running.json"

// CorruptCheckpointSuffix starts the name a checkpoint that cannot be read
// is moved to, kept for inspection: running.json.corrupt-UNIXTIME.
const CorruptCheckpointSuffix = ".corrupt-"

// checkpoint is the file CheckpointName.
type checkpoint struct {
	Version int       `json:"version"`
	Node    string    `json:"node"`
	Time    time.Time `json:"time"`
	Jobs    []*job    `json:"jobs"`
	// Pending are ended jobs' records the journal did not take yet.
	Pending []Record `json:"pending,omitempty"`
}

const checkpointVersion = 1

// maxCheckpointBytes bounds what is read of a checkpoint: some thousand
// times what a full node's running jobs take.
const maxCheckpointBytes = 256 << 20

// partialCheckpoint is the Partial of a job restored from a checkpoint
// that could not be read whole.
const partialCheckpoint = "the checkpoint holding this running job was corrupt: figures up to the restart may be missing, and a start the checkpoint lost is the time it was last written"

// loadCheckpoint reads the checkpoint in d. One that cannot be read as a
// whole is moved aside (kept for inspection) and logged, and what can be
// read of it is returned with its jobs marked Partial: corrupt says so. A
// missing checkpoint is nil.
func loadCheckpoint(d *safeDir, logger *slog.Logger) (c *checkpoint, corrupt bool, err error) {
	data, err := readSmall(d, CheckpointName)
	if errors.Is(err, syscall.ENOENT) {
		return nil, false, nil
	}
	if err != nil && !errors.Is(err, errNotRegular) && !errors.Is(err, syscall.ELOOP) {
		return nil, false, fmt.Errorf("%s: %w", CheckpointName, err)
	}
	if err == nil {
		c, err = parseCheckpoint(data)
		if err == nil {
			return c, false, nil
		}
	}
	written := time.Now()
	if info, err := os.Lstat(filepath.Join(d.path, CheckpointName)); err == nil {
		written = info.ModTime()
	}
	aside := fmt.Sprintf("%s%s%d", CheckpointName, CorruptCheckpointSuffix, time.Now().Unix())
	if rerr := d.rename(CheckpointName, aside); rerr != nil {
		return nil, true, fmt.Errorf("%s cannot be read (%w) nor moved aside (%w): move it away by hand", CheckpointName, err, rerr)
	}
	_ = d.sync()
	c = salvageCheckpoint(data, written)
	logger.Error("the checkpoint of the running jobs cannot be read: moved aside, its readable jobs restored as partial; their records will say figures may be missing",
		"err", err, "moved_to", aside, "jobs_restored", len(c.Jobs), "pending_records_restored", len(c.Pending))
	return c, true, nil
}

// readSmall reads a file of d up to maxCheckpointBytes, without following
// a link.
func readSmall(d *safeDir, name string) ([]byte, error) {
	f, err := d.open(name, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCheckpointBytes+1))
	if err == nil && len(data) > maxCheckpointBytes {
		err = fmt.Errorf("larger than %d bytes", maxCheckpointBytes)
	}
	return data, err
}

func parseCheckpoint(data []byte) (*checkpoint, error) {
	var c checkpoint
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	if c.Version != checkpointVersion {
		return nil, fmt.Errorf("version %d, this gpuwatch reads version %d", c.Version, checkpointVersion)
	}
	jobs := c.Jobs[:0]
	for _, jb := range c.Jobs {
		if validJob(jb) {
			jobs = append(jobs, jb)
		}
	}
	c.Jobs = jobs
	return &c, nil
}

func validJob(jb *job) bool {
	return jb != nil && jb.Key != "" && (jb.Slurm != nil || jb.Pod != nil)
}

// jobKeyPattern finds the identity of a job whose figures cannot be
// decoded, in what is left of a torn checkpoint.
var jobKeyPattern = regexp.MustCompile(`"key":"((?:slurm|pod)/[^"\\]{1,512})","kind":"(slurm|pod)"(?:,"slurm":\{"job_id":"([^"\\]{1,64})")?(?:,"pod":\{"namespace":"([^"\\]{1,253})","name":"([^"\\]{1,253})")?`)

// salvageCheckpoint reads what it can of a checkpoint that does not parse
// (a truncated or overwritten file): each job whose figures decode whole,
// and, of the others, the identity where it can be found. All are marked
// Partial. Pending records that decode are kept as they are.
//
// A job known only by its identity was running when the checkpoint was
// last written: that time, written, is its start and end.
func salvageCheckpoint(data []byte, written time.Time) *checkpoint {
	c := &checkpoint{Version: checkpointVersion}
	found := map[string]bool{}
	// The jobs array: decode one element at a time until one fails.
	if _, rest, ok := bytes.Cut(data, []byte(`"jobs":[`)); ok {
		dec := json.NewDecoder(bytes.NewReader(rest))
		for dec.More() {
			var jb job
			if dec.Decode(&jb) != nil {
				break
			}
			if validJob(&jb) {
				jb.Partial = partialCheckpoint
				c.Jobs = append(c.Jobs, &jb)
				found[jb.Key] = true
			}
		}
	}
	for _, m := range jobKeyPattern.FindAllSubmatch(data, -1) {
		key, kind := string(m[1]), string(m[2])
		if found[key] {
			continue
		}
		jb := &job{Key: key, Kind: kind, Partial: partialCheckpoint, Start: written.UTC(), LastSeen: written.UTC()}
		switch {
		case kind == KindSlurm && len(m[3]) > 0:
			jb.Slurm = &SlurmIdentity{JobID: string(m[3])}
		case kind == KindPod && len(m[5]) > 0:
			jb.Pod = &PodIdentity{Namespace: string(m[4]), Name: string(m[5])}
		default:
			continue
		}
		found[key] = true
		c.Jobs = append(c.Jobs, jb)
	}
	if _, rest, ok := bytes.Cut(data, []byte(`"pending":[`)); ok {
		dec := json.NewDecoder(bytes.NewReader(rest))
		for dec.More() {
			var r Record
			if dec.Decode(&r) != nil || r.ID == "" {
				break
			}
			c.Pending = append(c.Pending, r)
		}
	}
	return c
}

// ReadRunning reads the running jobs of the checkpoint in dir, as records
// (for `gpuwatch job` on a node whose gpuwatch it does not ask), and the
// ended jobs' records the journal did not take yet. A checkpoint that
// cannot be read whole gives what can be read of it, marked Partial,
// and no error: the journal's records are still found.
func ReadRunning(dir string) ([]Record, error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.New("the accounting directory cannot be opened: " + errName(err))
	}
	d := &safeDir{path: dir, f: f}
	defer d.close()
	data, err := readSmall(d, CheckpointName)
	if errors.Is(err, syscall.ENOENT) {
		return nil, nil
	}
	c, perr := parseCheckpoint(data)
	if err != nil || perr != nil {
		written := time.Now()
		if info, err := os.Lstat(filepath.Join(dir, CheckpointName)); err == nil {
			written = info.ModTime()
		}
		c = salvageCheckpoint(data, written)
	}
	out := make([]Record, 0, len(c.Jobs)+len(c.Pending))
	out = append(out, c.Pending...)
	for _, jb := range c.Jobs {
		out = append(out, jb.record(c.Node, true))
	}
	return out, nil
}
