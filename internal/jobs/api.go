package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ListDoc is /api/v1/jobs: a page of the journal's records, oldest first,
// then the running jobs'. ?pod=NAMESPACE/NAME keeps one pod's, ?kind=slurm|pod
// one kind's, ?since=RFC3339 those that ended at or after it; ?limit=N
// sizes the page and ?cursor=NextCursor asks for the next one.
type ListDoc struct {
	Records []Record `json:"records"`
	// NextCursor is set when more records follow: ask again with
	// ?cursor=NextCursor (and the same filters).
	NextCursor string `json:"next_cursor,omitempty"`
}

// JobDoc is /api/v1/jobs/ID: every record of that ID on this node (a
// requeued Slurm job keeps its ID), the running one last.
type JobDoc struct {
	ID      string   `json:"id"`
	Records []Record `json:"records"`
}

// Limits of the API, so that its cost stays bounded whatever the journal
// holds and however many clients ask.
const (
	// DefaultPageSize and MaxPageSize: records in one page of the list.
	DefaultPageSize = 100
	MaxPageSize     = 1000
	// MaxAnswerBytes bounds the journal lines one answer holds (a page
	// ends early rather than pass it); with the concurrency bound it
	// bounds the API's memory.
	MaxAnswerBytes = 4 << 20
	// DefaultMaxAPIRequests is the default of --web.max-api-requests.
	DefaultMaxAPIRequests = 4
	// apiQueueWait is how long a request waits for a turn before a 503.
	apiQueueWait = 10 * time.Second
)

// APIOptions configure Handler.
type APIOptions struct {
	// MaxInFlight is how many requests are answered at once; others wait
	// up to apiQueueWait for a turn, then get 503. 0: DefaultMaxAPIRequests.
	MaxInFlight int
}

// Handler serves /api/v1/jobs and /api/v1/jobs/ID from rec. It sits
// behind the same TLS and authentication as every other path. It reads
// the journal through an index, so that an answer costs what it holds.
func Handler(rec *Recorder, opts APIOptions) http.Handler {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxAPIRequests
	}
	a := &api{rec: rec, index: newJournalIndex(rec.opts.Dir), slots: make(chan struct{}, opts.MaxInFlight), queueWait: apiQueueWait}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/jobs", a.limited(a.list))
	mux.HandleFunc("GET /api/v1/jobs/{id}", a.limited(a.job))
	return mux
}

type api struct {
	rec   *Recorder
	index *journalIndex
	slots chan struct{}
	// queueWait is how long a request waits for a slot.
	queueWait time.Duration
}

// limited lets at most cap(slots) requests in at once; the others wait
// their turn within queueWait.
func (a *api) limited(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		wait := time.NewTimer(a.queueWait)
		defer wait.Stop()
		select {
		case a.slots <- struct{}{}:
			defer func() { <-a.slots }()
			h(w, r)
		case <-r.Context().Done():
		case <-wait.C:
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("too many concurrent API requests (limit %d, --web.max-api-requests): try again later", cap(a.slots)))
		}
	}
}

func (a *api) job(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	o, refs, err := a.index.job(id)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer o.close()
	lines, err := readLines(o, refs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var running []Record
	for _, x := range a.rec.Unjournaled() {
		if x.ID == id {
			running = append(running, x)
		}
	}
	if len(lines) == 0 && len(running) == 0 {
		writeError(w, http.StatusNotFound, "no record of job "+id+" on this node")
		return
	}
	idJSON, _ := json.Marshal(id)
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	b.Write(idJSON)
	b.WriteString(`,"records":`)
	writeRecords(&b, lines, running)
	b.WriteString("}\n")
	writeBody(w, http.StatusOK, b.Bytes())
}

// readLines reads the lines refs point to, no more than MaxAnswerBytes
// in all.
func readLines(o *openedJournal, refs []lineRef) ([][]byte, error) {
	lines := make([][]byte, 0, len(refs))
	total := 0
	for _, ref := range refs {
		if total += ref.n; total > MaxAnswerBytes && len(lines) > 0 {
			return nil, fmt.Errorf("the records are larger than the API's limit of %d MiB for one answer; read the journal itself", MaxAnswerBytes>>20)
		}
		line, err := o.readLine(ref)
		if err != nil {
			return nil, err
		}
		lines = append(lines, line)
	}
	return lines, nil
}

// writeRecords writes a JSON array of the journal's lines as they are
// (each a record the index parsed, so valid JSON) and then running.
func writeRecords(b *bytes.Buffer, lines [][]byte, running []Record) {
	b.WriteByte('[')
	for i, l := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(l)
	}
	for i, x := range running {
		if i > 0 || len(lines) > 0 {
			b.WriteByte(',')
		}
		data, _ := json.Marshal(x)
		b.Write(data)
	}
	b.WriteByte(']')
}

// listQuery is /api/v1/jobs's parameters.
type listQuery struct {
	filter listFilter
	limit  int
	after  *journalCursor
	// runningFrom skips that many running records: the journal's pages
	// are done.
	runningFrom int
	inRunning   bool
}

func parseListQuery(q map[string][]string) (listQuery, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	lq := listQuery{filter: listFilter{kind: get("kind"), pod: get("pod")}, limit: DefaultPageSize}
	if lq.filter.pod != "" && !strings.Contains(lq.filter.pod, "/") {
		return lq, fmt.Errorf("pod=%q: want NAMESPACE/NAME", lq.filter.pod)
	}
	if s := get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return lq, fmt.Errorf("since=%q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", s)
		}
		lq.filter.since = t
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			return lq, fmt.Errorf("limit=%q: want a number of records from 1 to %d", s, MaxPageSize)
		}
		lq.limit = n
	}
	if s := get("cursor"); s != "" {
		if err := lq.parseCursor(s); err != nil {
			return lq, fmt.Errorf("cursor=%q: not one this server gave (take next_cursor from the last answer as it is)", s)
		}
	}
	return lq, nil
}

// A cursor is j-DEV-INO-HEAD-OFFSET (after that record of the journal) or
// r-N (after N running records), in hexadecimal.
func (lq *listQuery) parseCursor(s string) error {
	parts := strings.Split(s, "-")
	nums := make([]uint64, 0, 4)
	for _, p := range parts[1:] {
		n, err := strconv.ParseUint(p, 16, 64)
		if err != nil {
			return err
		}
		nums = append(nums, n)
	}
	switch {
	case parts[0] == "j" && len(nums) == 4 && nums[3] < 1<<62:
		lq.after = &journalCursor{key: fileKey{dev: nums[0], ino: nums[1], head: nums[2]}, off: int64(nums[3])}
	case parts[0] == "r" && len(nums) == 1 && nums[0] < 1<<20:
		lq.inRunning, lq.runningFrom = true, int(nums[0])
	default:
		return fmt.Errorf("bad cursor")
	}
	return nil
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var lines [][]byte
	next, more := "", false
	if !lq.inRunning {
		o, refs, after, m, err := a.index.page(lq.filter, lq.after, lq.limit, MaxAnswerBytes)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		lines, err = readLines(o, refs)
		o.close()
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		more = m
		next = fmt.Sprintf("j-%x-%x-%x-%x", after.key.dev, after.key.ino, after.key.head, after.off)
	}
	var running []Record
	if !more {
		var all []Record
		for _, x := range a.rec.Unjournaled() {
			if lq.filter.keeps(x.Kind, podName(x), x.End) {
				all = append(all, x)
			}
		}
		all = all[min(lq.runningFrom, len(all)):]
		room := lq.limit - len(lines)
		running = all[:min(room, len(all))]
		if len(all) > room {
			more, next = true, fmt.Sprintf("r-%x", lq.runningFrom+room)
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"records":`)
	writeRecords(&b, lines, running)
	if more {
		b.WriteString(`,"next_cursor":"` + next + `"`)
	}
	b.WriteString("}\n")
	writeBody(w, http.StatusOK, b.Bytes())
}

func podName(x Record) string {
	if x.Pod == nil {
		return ""
	}
	return x.Pod.Namespace + "/" + x.Pod.Name
}

// MatchesPod says whether record x is of pod "NAMESPACE/NAME".
func MatchesPod(x Record, pod string) bool {
	ns, name, ok := strings.Cut(pod, "/")
	return ok && x.Pod != nil && x.Pod.Namespace == ns && x.Pod.Name == name
}

func writeError(w http.ResponseWriter, status int, msg string) {
	data, _ := json.Marshal(map[string]string{"error": msg})
	writeBody(w, status, append(data, '\n'))
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
