package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Job is one job as squeue, scontrol or the JSON API report it, reduced to
// what gpuwatch exports.
type Job struct {
	ID        string
	Name      string
	User      string
	Account   string
	Partition string
	// State is the base state in upper case ("RUNNING", "PENDING",
	// "COMPLETED"); flags that newer versions append are dropped.
	State string
	// Reason is why a job waits ("Resources", "Dependency", "Priority");
	// "None" for jobs that do not wait.
	Reason    string
	Nodes     []string // expanded node names; empty while pending
	NodeCount int
	CPUs      int
	// GPUs the job holds (running) or asks for (pending), by type.
	GPUs []GPUCount
	// GPUAlloc is, per node, the GPUs the job holds with their indexes
	// when Slurm reports them (gres_detail / scontrol -d GRES=).
	GPUAlloc []NodeGPUs
	// Start is when the job started (scontrol's StartTime); zero when
	// Slurm gives none, or for a job that has not started (its StartTime
	// is then a forecast).
	Start time.Time
}

// HoldsResources says whether the job's allocation is live: it has
// started and not yet released its nodes.
func (j *Job) HoldsResources() bool {
	switch j.State {
	case "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "RESIZING", "SIGNALING", "STAGE_OUT":
		return true
	}
	return false
}

// squeueJSON is the part of `squeue --json` that gpuwatch reads. Field names
// are the same in openapi v0.0.38 (Slurm 22.05) and data_parser v0.0.40+
// (23.11, 24.x); numbers and job_state changed shape, which the flex types
// absorb.
type squeueJSON struct {
	Errors jsonErrors    `json:"errors"`
	Jobs   []jobJSONItem `json:"jobs"`
}

type jobJSONItem struct {
	JobID        flexNumber  `json:"job_id"`
	ArrayJobID   flexNumber  `json:"array_job_id"`
	ArrayTaskID  flexNumber  `json:"array_task_id"`
	Name         string      `json:"name"`
	UserName     string      `json:"user_name"`
	UserID       flexNumber  `json:"user_id"`
	Account      string      `json:"account"`
	Partition    string      `json:"partition"`
	JobState     flexStrings `json:"job_state"`
	StateReason  string      `json:"state_reason"`
	Nodes        string      `json:"nodes"`
	NodeCount    flexNumber  `json:"node_count"`
	CPUs         flexNumber  `json:"cpus"`
	GresDetail   []string    `json:"gres_detail"`
	TresAllocStr string      `json:"tres_alloc_str"`
	TresReqStr   string      `json:"tres_req_str"`
	TresPerNode  string      `json:"tres_per_node"`
	TresPerJob   string      `json:"tres_per_job"`
	JobResources *struct {
		AllocatedNodes json.RawMessage `json:"allocated_nodes"`
	} `json:"job_resources"`
}

// ParseSqueueJSON reads `squeue --json` output of any supported schema.
func ParseSqueueJSON(data []byte) ([]Job, error) {
	var doc squeueJSON
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, jsonSyntaxError("squeue --json", data, err)
	}
	if doc.Jobs == nil {
		if err := doc.Errors.err("squeue"); err != nil {
			return nil, err
		}
		if !bytes.Contains(data, []byte(`"jobs"`)) {
			return nil, fmt.Errorf("squeue --json: no \"jobs\" list in the output")
		}
	}
	jobs := make([]Job, 0, len(doc.Jobs))
	for i := range doc.Jobs {
		j, err := doc.Jobs[i].toJob()
		if err != nil {
			return nil, fmt.Errorf("squeue --json: jobs[%d] (job %d): %w", i, doc.Jobs[i].JobID.Value, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func (it *jobJSONItem) toJob() (Job, error) {
	if !it.JobID.Set {
		return Job{}, fmt.Errorf("field job_id is missing")
	}
	j := Job{
		ID:        strconv.FormatInt(it.JobID.Value, 10),
		Name:      it.Name,
		User:      it.UserName,
		Account:   it.Account,
		Partition: it.Partition,
		Reason:    it.StateReason,
		NodeCount: it.NodeCount.Int(),
		CPUs:      it.CPUs.Int(),
	}
	if j.User == "" && it.UserID.Set {
		j.User = strconv.FormatInt(it.UserID.Value, 10)
	}
	if len(it.JobState) > 0 {
		j.State = strings.ToUpper(it.JobState[0])
	}
	nodes, err := ExpandHostlist(it.Nodes)
	if err != nil {
		return Job{}, fmt.Errorf("field nodes: %w", err)
	}
	j.Nodes = nodes
	if order := allocatedNodeNames(it.JobResources); len(order) == len(it.GresDetail) && len(order) > 0 {
		// gres_detail follows the job_resources node order.
		nodes = order
	}
	if len(it.GresDetail) > 0 {
		alloc, err := zipGresDetail(nodes, it.GresDetail)
		if err != nil {
			return Job{}, fmt.Errorf("field gres_detail: %w", err)
		}
		j.GPUAlloc = alloc
	}
	gpus, err := jobGPUs(&j, it.TresAllocStr, it.TresReqStr, it.TresPerNode, it.TresPerJob)
	if err != nil {
		return Job{}, err
	}
	j.GPUs = gpus
	return j, nil
}

// allocatedNodeNames reads job_resources.allocated_nodes, a list of
// {"nodename": ...} in v0.0.38 and a list of {"name": ...} later.
func allocatedNodeNames(res *struct {
	AllocatedNodes json.RawMessage `json:"allocated_nodes"`
}) []string {
	if res == nil || len(res.AllocatedNodes) == 0 {
		return nil
	}
	var list []struct {
		Nodename string `json:"nodename"`
		Name     string `json:"name"`
	}
	if json.Unmarshal(res.AllocatedNodes, &list) != nil {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, n := range list {
		name := n.Nodename
		if name == "" {
			name = n.Name
		}
		if name == "" {
			return nil
		}
		out = append(out, name)
	}
	return out
}

// zipGresDetail pairs gres_detail entries (one per allocated node, in node
// order) with node names.
func zipGresDetail(nodes []string, detail []string) ([]NodeGPUs, error) {
	var out []NodeGPUs
	for i, d := range detail {
		entries, err := ParseGRESDetail(d)
		if err != nil {
			return nil, err
		}
		node := ""
		if i < len(nodes) {
			node = nodes[i]
		}
		for _, e := range entries {
			if e.Count == 0 {
				continue
			}
			e.Node = node
			out = append(out, e)
		}
	}
	return out, nil
}

// jobGPUs decides how many GPUs of which type a job holds or asks for, from
// the most precise source present: the per-node allocation (gres_detail),
// the allocated TRES, then the request (TRES, per node × nodes, per job).
func jobGPUs(j *Job, tresAlloc, tresReq, perNode, perJob string) ([]GPUCount, error) {
	if len(j.GPUAlloc) > 0 {
		var g []GPUCount
		for _, a := range j.GPUAlloc {
			g = append(g, GPUCount{Type: a.Type, Count: a.Count})
		}
		return sumByType(g), nil
	}
	if j.HoldsResources() {
		_, g, err := ParseTRES(tresAlloc)
		if err != nil {
			return nil, fmt.Errorf("field tres_alloc_str: %w", err)
		}
		if len(g) > 0 {
			return sumByType(g), nil
		}
	}
	_, g, err := ParseTRES(tresReq)
	if err != nil {
		return nil, fmt.Errorf("field tres_req_str: %w", err)
	}
	if len(g) > 0 {
		return sumByType(g), nil
	}
	if g, err = ParseGRES(perNode); err != nil {
		return nil, fmt.Errorf("field tres_per_node: %w", err)
	}
	if len(g) > 0 {
		n := max(j.NodeCount, 1)
		for i := range g {
			g[i].Count *= n
		}
		return sumByType(g), nil
	}
	if g, err = ParseGRES(perJob); err != nil {
		return nil, fmt.Errorf("field tres_per_job: %w", err)
	}
	return sumByType(g), nil
}

// SqueueFormat is the `squeue -o` format of the fallback for Slurm without
// --json: id|state|partition|user|account|reason|tres_per_node|nodes|cpus|nodelist.
const SqueueFormat = "%i|%T|%P|%u|%a|%r|%b|%D|%C|%N"

// SqueueFormattedArgs are the arguments of the fallback invocation.
var SqueueFormattedArgs = []string{"-h", "--states=all", "-o", SqueueFormat}

// ParseSqueueFormatted reads `squeue -h --states=all -o SqueueFormat`.
func ParseSqueueFormatted(data []byte) ([]Job, error) {
	var jobs []Job
	err := scanPipeRecords(data, "squeue -o", 10, func(line int, f []string) error {
		if _, err := strconv.ParseUint(strings.SplitN(f[0], "_", 2)[0], 10, 64); err != nil {
			return fmt.Errorf("squeue -o: line %d: field 1 (job id) %q is not a job id", line, f[0])
		}
		j := Job{
			ID: f[0], State: strings.ToUpper(f[1]), Partition: f[2],
			User: f[3], Account: nullToEmpty(f[4]), Reason: f[5],
		}
		var err error
		if j.NodeCount, err = atoiField(f[7]); err != nil {
			return fmt.Errorf("squeue -o: line %d: field 8 (nodes): %w", line, err)
		}
		if j.CPUs, err = atoiField(f[8]); err != nil {
			return fmt.Errorf("squeue -o: line %d: field 9 (cpus): %w", line, err)
		}
		if j.Nodes, err = ExpandHostlist(f[9]); err != nil {
			return fmt.Errorf("squeue -o: line %d: field 10 (nodelist): %w", line, err)
		}
		if j.GPUs, err = jobGPUs(&j, "", "", f[6], ""); err != nil {
			return fmt.Errorf("squeue -o: line %d: field 7 (tres_per_node): %w", line, err)
		}
		jobs = append(jobs, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

func atoiField(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "N/A" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n, nil
}

func nullToEmpty(s string) string {
	if s == "(null)" || s == "N/A" {
		return ""
	}
	return s
}
