package smibackend

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// parseHelp returns the property names `nvidia-smi --help-query-gpu` (or
// --help-query-compute-apps) lists. Each property's paragraph starts with
// its quoted names: `"name" or "gpu_name"`.
func parseHelp(out []byte) map[string]bool {
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if !strings.HasPrefix(line, `"`) {
			continue
		}
		for part := range strings.SplitSeq(line, " or ") {
			part = strings.TrimSpace(part)
			if len(part) > 2 && strings.HasPrefix(part, `"`) && strings.HasSuffix(part, `"`) {
				names[strings.Trim(part, `"`)] = true
			}
		}
	}
	return names
}

// query is the --query-gpu asked of one driver: the fields it knows, each
// under the name it knows it by, and what it lacks.
type query struct {
	fields []field
	names  []string
	// missing lists, per group, the properties the driver does not know.
	missing map[string][]string
}

// plan picks the fields of the enabled groups the driver lists. Index and
// UUID are always asked for: without them no row is a GPU.
func plan(known map[string]bool, groups map[string]bool) (query, error) {
	q := query{missing: map[string][]string{}}
	for i, f := range gpuFields {
		if i >= 2 && !groups[f.group] && f.group != snapshot.GroupInfo {
			continue
		}
		name := ""
		for _, n := range f.names {
			if known[n] {
				name = n
				break
			}
		}
		if name == "" {
			if i < 2 {
				return query{}, fmt.Errorf("nvidia-smi --help-query-gpu does not list %q: is it nvidia-smi?", f.names[0])
			}
			q.missing[f.group] = append(q.missing[f.group], f.names[0])
			continue
		}
		q.fields = append(q.fields, f)
		q.names = append(q.names, name)
	}
	return q, nil
}

// problem is a field of one GPU that did not give a value.
type problem struct {
	gpu   int
	name  string // the property's name as asked for
	group string
	state State
	raw   string
}

func (p problem) Error() string {
	return fmt.Sprintf("nvidia-smi %s of GPU %d: %s (%q)", p.name, p.gpu, p.state, p.raw)
}

// table is the parsed output of one --query-gpu run.
type table struct {
	devices  []snapshot.Device
	driver   string
	problems []problem
	// garbageRows counts lines that are neither a GPU's row nor a GPU
	// nvidia-smi reports it cannot reach.
	garbageRows int
}

// handleError is nvidia-smi's line for a GPU it cannot reach, printed in
// place of the GPU's row.
var handleError = regexp.MustCompile(`^Unable to determine the device handle for (?:GPU|gpu) ?([0-9A-Fa-f:.]+): (.*)$`)

// parseGPUs reads --format=csv,noheader,nounits output. A GPU's row is
// its values joined by ", " (a localized decimal comma has no space
// after it). A row of the wrong length, or a line that is no row, cannot
// be trusted for any field: it counts as garbage and gives no GPU.
func parseGPUs(out []byte, q query) table {
	var t table
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), maxOutput)
	position := 0
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" {
			continue
		}
		if m := handleError.FindStringSubmatch(line); m != nil {
			t.devices = append(t.devices, snapshot.Device{Index: position, DownReason: downReason(m[2]), Info: snapshot.Info{PCIBusID: m[1]}})
			position++
			continue
		}
		values := strings.Split(line, ", ")
		if len(values) != len(q.fields) {
			t.garbageRows++
			continue
		}
		t.parseRow(values, q, position)
		position++
	}
	return t
}

// parseRow reads one GPU's row into a device. A row whose index or UUID
// is not a value names no GPU: it counts as garbage.
func (t *table) parseRow(values []string, q query, position int) {
	r := row{d: &snapshot.Device{Index: position, Up: true}}
	var problems []problem
	for i, f := range q.fields {
		state := classify(values[i])
		if state == Present {
			if err := f.set(&r, values[i]); err != nil {
				state = Garbage
			}
		}
		if state != Present {
			problems = append(problems, problem{name: q.names[i], group: f.group, state: state, raw: strings.TrimSpace(values[i])})
		}
	}
	for _, p := range problems {
		if p.name == "index" || p.name == "uuid" {
			if p.state == GPULost {
				t.devices = append(t.devices, snapshot.Device{Index: position, DownReason: "gpu_is_lost"})
				return
			}
			t.garbageRows++
			return
		}
		if p.state == GPULost {
			*r.d = snapshot.Device{Index: r.d.Index, UUID: r.d.UUID, DownReason: "gpu_is_lost"}
			problems = nil
			break
		}
	}
	r.finish()
	if r.driver != "" {
		t.driver = r.driver
	}
	for i := range problems {
		problems[i].gpu = r.d.Index
	}
	t.problems = append(t.problems, problems...)
	t.devices = append(t.devices, *r.d)
}

// downReason names why nvidia-smi could not reach a GPU, from the end of
// its "Unable to determine the device handle" line.
func downReason(msg string) string {
	msg = strings.ToLower(msg)
	switch {
	case strings.Contains(msg, "gpu is lost"):
		return "gpu_is_lost"
	case strings.Contains(msg, "unknown error"):
		return "unknown_error"
	}
	return "unreachable"
}

// processFields are the --query-compute-apps properties read. They are
// listed by every driver nvidia-smi's CSV output has existed in.
var processFields = []string{"gpu_uuid", "pid", "used_memory"}

// parseProcesses reads --query-compute-apps output into processes of the
// devices (by UUID). A process on a GPU not in devices, or a line that does
// not parse, is left out and counted as garbage.
func parseProcesses(out []byte, devices []snapshot.Device) (procs []snapshot.Process, garbage int) {
	index := make(map[string]int, len(devices))
	for _, d := range devices {
		if d.UUID != "" {
			index[d.UUID] = d.Index
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), maxOutput)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" || strings.HasPrefix(line, "No running") {
			continue
		}
		values := strings.Split(line, ", ")
		if len(values) != len(processFields) {
			garbage++
			continue
		}
		uuid := strings.TrimSpace(values[0])
		gpu, known := index[uuid]
		pid, err := whole(values[1])
		if !known || err != nil || pid == 0 || pid > 1<<32-1 {
			garbage++
			continue
		}
		p := snapshot.Process{GPU: gpu, GPUUUID: uuid, PID: uint32(pid), Type: "compute"}
		if classify(values[2]) == Present {
			n, err := whole(values[2])
			if err != nil {
				garbage++
			} else {
				p.UsedMemory = snapshot.Some(n << 20)
			}
		}
		procs = append(procs, p)
	}
	return procs, garbage
}
