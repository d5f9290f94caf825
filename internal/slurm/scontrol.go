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
	for _, w := range strings.Split(s, " ") {
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
	var j Job
	var tres, tresPerNode, tresPerJob string
	var groupNodes []string

	for _, p := range pairs {
		switch p.key {
		case "JobId":
			if _, err := strconv.ParseUint(p.val, 10, 64); err != nil {
				return Job{}, fmt.Errorf("field JobId %q is not a job id", p.val)
			}
			j.ID = p.val
		case "JobName":
			j.Name = p.val
		case "UserId":
			// "alice(1000)"
			name, _, _ := strings.Cut(p.val, "(")
			j.User = name
		case "Account":
			j.Account = nullToEmpty(p.val)
		case "Partition":
			j.Partition = p.val
		case "JobState":
			j.State = strings.ToUpper(p.val)
		case "Reason":
			j.Reason = p.val
		case "StartTime":
			// scontrol prints local time without a zone ("Unknown" or
			// "None" when there is none); it runs as gpuwatch's child, in
			// gpuwatch's time zone.
			if t, err := time.ParseInLocation("2006-01-02T15:04:05", p.val, time.Local); err == nil {
				j.Start = t
			}
		case "NodeList":
			nodes, err := ExpandHostlist(p.val)
			if err != nil {
				return Job{}, fmt.Errorf("field NodeList: %w", err)
			}
			j.Nodes = nodes
		case "NumNodes":
			// "1" or "1-2" while pending.
			n, _, _ := strings.Cut(p.val, "-")
			j.NodeCount, _ = strconv.Atoi(n)
		case "NumCPUs":
			n, _, _ := strings.Cut(p.val, "-")
			j.CPUs, _ = strconv.Atoi(n)
		case "TRES":
			tres = p.val
		case "TresPerNode":
			tresPerNode = p.val
		case "TresPerJob":
			tresPerJob = p.val
		case "Nodes":
			nodes, err := ExpandHostlist(p.val)
			if err != nil {
				return Job{}, fmt.Errorf("field Nodes: %w", err)
			}
			groupNodes = nodes
		case "GRES":
			entries, err := ParseGRESDetail(p.val)
			if err != nil {
				return Job{}, fmt.Errorf("field GRES: %w", err)
			}
			for _, node := range groupNodes {
				for _, e := range entries {
					if e.Count == 0 {
						continue
					}
					e.Node = node
					e.Indexes = append([]int(nil), e.Indexes...)
					j.GPUAlloc = append(j.GPUAlloc, e)
				}
			}
		}
	}
	// TRES is the allocation for a started job and the request before.
	gpus, err := jobGPUs(&j, tres, tres, tresPerNode, tresPerJob)
	if err != nil {
		return Job{}, err
	}
	j.GPUs = gpus
	if j.State == "PENDING" {
		j.Start = time.Time{} // a forecast, not a start
	}
	return j, nil
}
