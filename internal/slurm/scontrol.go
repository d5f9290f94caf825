package slurm

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseScontrolJobs reads `scontrol show job -d -o [JOBID]`: one line per
// job of Key=Value pairs. With -d each node group of a running job adds
// "Nodes=<hostlist> CPU_IDs=... Mem=... GRES=gpu:h100:1(IDX:0)", which gives
// the GPU indexes the job holds on each node.
func ParseScontrolJobs(data []byte) ([]Job, error) {
	var jobs []Job
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "No jobs in the system") {
			continue
		}
		j, err := parseScontrolJobLine(text)
		if err != nil {
			return nil, fmt.Errorf("scontrol show job: line %d: %w", line, err)
		}
		jobs = append(jobs, j)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scontrol show job: line %d: %w", line+1, err)
	}
	return jobs, nil
}

// kv is one Key=Value pair of scontrol's one-line output.
type kv struct{ key, val string }

// splitScontrolLine splits "A=1 B=two words C=3" into pairs. A word with
// no '=' (or one that does not start like a key) continues the previous
// value, which keeps job names and paths with spaces whole.
func splitScontrolLine(s string) []kv {
	var out []kv
	for w := range strings.SplitSeq(s, " ") {
		if w == "" {
			continue
		}
		k, v, ok := strings.Cut(w, "=")
		if ok && looksLikeKey(k) {
			out = append(out, kv{k, v})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].val += " " + w
		}
	}
	return out
}

func looksLikeKey(k string) bool {
	if k == "" || !(k[0] >= 'A' && k[0] <= 'Z' || k[0] >= 'a' && k[0] <= 'z') {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == ':' || c == '/') {
			return false
		}
	}
	return true
}

func parseScontrolJobLine(text string) (Job, error) {
	pairs := splitScontrolLine(text)
	if len(pairs) == 0 || pairs[0].key != "JobId" {
		return Job{}, fmt.Errorf("does not start with JobId=: %.60q", text)
	}
	var r scontrolJobReader
	for _, p := range pairs {
		if err := r.field(p.key, p.val); err != nil {
			return Job{}, err
		}
	}
	// TRES is the allocation for a started job and the request before.
	gpus, err := jobGPUs(&r.job, r.tres, r.tres, r.tresPerNode, r.tresPerJob)
	if err != nil {
		return Job{}, err
	}
	r.job.GPUs = gpus
	if r.job.State == "PENDING" {
		r.job.Start = time.Time{} // a forecast, not a start
	}
	return r.job, nil
}

// scontrolJobReader is one job line of `scontrol show job -d -o` as read so
// far: the Job, and the fields that only make sense together.
type scontrolJobReader struct {
	job                           Job
	tres, tresPerNode, tresPerJob string
	// groupNodes are the nodes of the latest "Nodes=" of the -d detail,
	// which the GRES= after it belongs to.
	groupNodes []string
}

// plainJobFields are the fields copied as they are (or with a trivial
// cleanup); field handles the rest.
var plainJobFields = map[string]func(r *scontrolJobReader, val string){
	"JobName":     func(r *scontrolJobReader, v string) { r.job.Name = v },
	"UserId":      func(r *scontrolJobReader, v string) { r.job.User, _, _ = strings.Cut(v, "(") }, // "alice(1000)"
	"Account":     func(r *scontrolJobReader, v string) { r.job.Account = nullToEmpty(v) },
	"Partition":   func(r *scontrolJobReader, v string) { r.job.Partition = v },
	"JobState":    func(r *scontrolJobReader, v string) { r.job.State = strings.ToUpper(v) },
	"Reason":      func(r *scontrolJobReader, v string) { r.job.Reason = v },
	"StartTime":   func(r *scontrolJobReader, v string) { r.job.Start = localTime(v) },
	"NumNodes":    func(r *scontrolJobReader, v string) { r.job.NodeCount = leadingInt(v) }, // "1", or "1-2" while pending
	"NumCPUs":     func(r *scontrolJobReader, v string) { r.job.CPUs = leadingInt(v) },
	"TRES":        func(r *scontrolJobReader, v string) { r.tres = v },
	"TresPerNode": func(r *scontrolJobReader, v string) { r.tresPerNode = v },
	"TresPerJob":  func(r *scontrolJobReader, v string) { r.tresPerJob = v },
}

// field reads one key=value; keys gpuwatch does not use are skipped.
func (r *scontrolJobReader) field(key, val string) error {
	if set, ok := plainJobFields[key]; ok {
		set(r, val)
		return nil
	}
	var err error
	switch key {
	case "JobId":
		if _, perr := strconv.ParseUint(val, 10, 64); perr != nil {
			return fmt.Errorf("field JobId %q is not a job id", val)
		}
		r.job.ID = val
	case "NodeList":
		r.job.Nodes, err = ExpandHostlist(val)
	case "Nodes":
		r.groupNodes, err = ExpandHostlist(val)
	case "GRES":
		err = r.gres(val)
	}
	if err != nil {
		return fmt.Errorf("field %s: %w", key, err)
	}
	return nil
}

// gres adds the GPUs of one "GRES=" detail on each node of the group it
// follows.
func (r *scontrolJobReader) gres(val string) error {
	entries, err := ParseGRESDetail(val)
	if err != nil {
		return err
	}
	for _, node := range r.groupNodes {
		for _, e := range entries {
			if e.Count == 0 {
				continue
			}
			e.Node = node
			e.Indexes = append([]int(nil), e.Indexes...)
			r.job.GPUAlloc = append(r.job.GPUAlloc, e)
		}
	}
	return nil
}

// leadingInt is the first number of "4" or of a pending job's range "1-2";
// 0 when there is none.
func leadingInt(v string) int {
	n, _, _ := strings.Cut(v, "-")
	i, _ := strconv.Atoi(n)
	return i
}

// localTime reads a time as scontrol prints it: local time without a zone
// ("2026-11-21T13:01:57"); zero for "Unknown", "None" or anything else.
// scontrol runs as gpuwatch's child, in gpuwatch's time zone.
func localTime(v string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}
