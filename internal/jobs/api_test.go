package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// apiRig is a Recorder on a journal of small rotated files, served over a
// real loopback HTTP server.
type apiRig struct {
	t   *testing.T
	dir string
	rec *Recorder
	srv *httptest.Server
}

func newAPIRig(t *testing.T, maxBytes int64, files int, opts APIOptions) *apiRig {
	t.Helper()
	dir := t.TempDir()
	rec, err := Open(Options{Dir: dir, Node: "n1", JournalMaxBytes: maxBytes, JournalFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	srv := httptest.NewServer(Handler(rec, opts))
	t.Cleanup(srv.Close)
	return &apiRig{t: t, dir: dir, rec: rec, srv: srv}
}

func (a *apiRig) append(r Record) {
	a.t.Helper()
	if err := a.rec.journal.Append(r); err != nil {
		a.t.Fatal(err)
	}
}

// running makes a Slurm job running on the recorder's tracker.
func (a *apiRig) running(id string) {
	a.rec.mu.Lock()
	defer a.rec.mu.Unlock()
	a.rec.tracker.jobs["slurm/"+id] = &job{Key: "slurm/" + id, Kind: KindSlurm, Slurm: &SlurmIdentity{JobID: id},
		Start: time.Unix(5000, 0).UTC(), LastSeen: time.Unix(5100, 0).UTC(), GPUs: []*gpuFigures{{UUID: "GPU-0", Process: 100}}}
}

// get asks path and decodes the answer into v; it returns the status.
func (a *apiRig) get(path string, v any) int {
	a.t.Helper()
	resp, err := http.Get(a.srv.URL + path)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		a.t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode
}

// pages follows next_cursor from query and returns the IDs in order and
// how many pages it took.
func (a *apiRig) pages(query string) (ids []string, pages int) {
	a.t.Helper()
	cursor := ""
	for {
		q, _ := url.ParseQuery(query)
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var doc ListDoc
		if st := a.get("/api/v1/jobs?"+q.Encode(), &doc); st != http.StatusOK {
			a.t.Fatalf("%s: %d", q.Encode(), st)
		}
		pages++
		for _, r := range doc.Records {
			id := r.ID
			if r.Running {
				id += "(running)"
			}
			ids = append(ids, id)
		}
		if doc.NextCursor == "" || pages > 1000 {
			return ids, pages
		}
		cursor = doc.NextCursor
	}
}

func idRange(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// The list comes in pages that together hold every record once, oldest
// first across rotated files, then the running jobs; since and kind
// filter before the page is cut.
func TestAPIListPages(t *testing.T) {
	a := newAPIRig(t, 2048, 3, APIOptions{})
	for i := range 40 {
		a.append(testRecord(i))
	}
	a.running("9001")
	a.running("9002")
	var kept []string
	all, _, err := ReadJournal(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		kept = append(kept, r.ID)
	}
	if len(kept) >= 40 || len(kept) < 10 {
		t.Fatalf("the journal kept %d records: the test wants rotation to have dropped some", len(kept))
	}
	want := append(slices.Clone(kept), "9001(running)", "9002(running)")

	ids, pages := a.pages("limit=3")
	if !slices.Equal(ids, want) {
		t.Errorf("pages of 3:\n got %v\nwant %v", ids, want)
	}
	if wantPages := (len(want) + 2) / 3; pages != wantPages {
		t.Errorf("%d pages of 3 for %d records, want %d", pages, len(want), wantPages)
	}
	var first ListDoc
	a.get("/api/v1/jobs", &first)
	if len(first.Records) != len(want) || first.NextCursor != "" {
		t.Errorf("default page: %d records, cursor %q; want all %d in one page", len(first.Records), first.NextCursor, len(want))
	}

	// testRecord(i) ends at i+60 s.
	last := kept[len(kept)-1]
	n, _ := strconv.Atoi(last)
	since := time.Unix(int64(n-5+60), 0).UTC().Format(time.RFC3339)
	ids, _ = a.pages("limit=2&since=" + since)
	if want := append(idRange(n-5, n+1), "9001(running)", "9002(running)"); !slices.Equal(ids, want) {
		t.Errorf("since %s: got %v, want %v", since, ids, want)
	}
	if ids, _ = a.pages("kind=pod"); len(ids) != 0 {
		t.Errorf("kind=pod: %v, want none", ids)
	}
}

// A page's cursor stays good while the journal rotates under it: the
// next page starts after the last record given, and a cursor whose file
// left the journal starts again at the oldest record.
func TestAPICursorAcrossRotation(t *testing.T) {
	a := newAPIRig(t, 2048, 3, APIOptions{})
	for i := range 10 {
		a.append(testRecord(i))
	}
	var page ListDoc
	a.get("/api/v1/jobs?limit=4", &page)
	if len(page.Records) != 4 || page.Records[3].ID != "3" || page.NextCursor == "" {
		t.Fatalf("first page: %+v", page)
	}
	for i := 10; i < 16; i++ { // rotates at least once
		a.append(testRecord(i))
	}
	var next ListDoc
	a.get("/api/v1/jobs?limit=4&cursor="+page.NextCursor, &next)
	if len(next.Records) == 0 || next.Records[0].ID != "4" {
		t.Errorf("the page after a rotation starts at %+v, want record 4", next.Records)
	}
	for i := 16; i < 60; i++ { // rotates the first page's file away
		a.append(testRecord(i))
	}
	all, _, _ := ReadJournal(a.dir)
	a.get("/api/v1/jobs?limit=4&cursor="+page.NextCursor, &next)
	if len(next.Records) == 0 || next.Records[0].ID != all[0].ID {
		t.Errorf("a cursor into a removed file: page starts at %+v, want the oldest record %s", next.Records, all[0].ID)
	}
}

// One job's answer follows the journal as it grows and rotates, holds a
// record written twice once, and comes with the running one last.
func TestAPIJobFollowsTheJournal(t *testing.T) {
	a := newAPIRig(t, 2048, 3, APIOptions{})
	var doc JobDoc
	if st := a.get("/api/v1/jobs/7", &doc); st != http.StatusNotFound {
		t.Errorf("empty journal: %d, want 404", st)
	}
	for i := range 8 {
		a.append(testRecord(i))
	}
	if a.get("/api/v1/jobs/7", &doc); len(doc.Records) != 1 || doc.Records[0].ID != "7" {
		t.Fatalf("job 7: %+v", doc)
	}
	requeued := testRecord(7)
	requeued.Start, requeued.End = requeued.Start.Add(time.Hour), requeued.End.Add(time.Hour)
	for i := 8; i < 20; i++ { // rotates record 7's file to .1 or .2
		a.append(testRecord(i))
	}
	a.append(requeued)
	a.append(requeued) // written again after a crash before the checkpoint
	a.running("7")
	doc = JobDoc{}
	a.get("/api/v1/jobs/7", &doc)
	if len(doc.Records) != 3 || !doc.Records[0].Start.Equal(testRecord(7).Start) || !doc.Records[1].Start.Equal(requeued.Start) || !doc.Records[2].Running {
		t.Errorf("job 7 after rotation, a requeue written twice and a new run: %+v", doc.Records)
	}
}

// Lines that are not records do not hide the others: a torn line, one
// longer than a record may be, a directory where a rotated file goes; and
// a link where a rotated file goes is not followed.
func TestAPISkipsWhatIsNotARecord(t *testing.T) {
	a := newAPIRig(t, 1<<30, 3, APIOptions{})
	a.append(testRecord(1))
	f, err := os.OpenFile(filepath.Join(a.dir, JournalName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	long := `{"id":"2","x":"` + strings.Repeat("x", maxRecordLine) + "\"}\n"
	if _, err := f.WriteString(long + "{\"id\":\"torn\n"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	a.append(testRecord(3))
	if err := os.Mkdir(filepath.Join(a.dir, JournalName+".2"), 0o750); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(t.TempDir(), "planted.jsonl")
	line, _ := json.Marshal(testRecord(99))
	if err := os.WriteFile(planted, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(planted, filepath.Join(a.dir, JournalName+".1")); err != nil {
		t.Fatal(err)
	}
	if ids, _ := a.pages(""); !slices.Equal(ids, []string{"1", "3"}) {
		t.Errorf("records: %v, want 1 and 3", ids)
	}
	var doc JobDoc
	if st := a.get("/api/v1/jobs/3", &doc); st != http.StatusOK || len(doc.Records) != 1 {
		t.Errorf("job 3: %d %+v", st, doc)
	}
}

// Bad parameters get a 400 that names them.
func TestAPIRefusesBadParameters(t *testing.T) {
	a := newAPIRig(t, 0, 0, APIOptions{})
	for q, want := range map[string]string{
		"limit=0":           "limit=",
		"limit=1001":        "limit=",
		"limit=x":           "limit=",
		"since=yesterday":   "since=",
		"cursor=j-1-2":      "cursor=",
		"cursor=q-1":        "cursor=",
		"cursor=j-1-2-3-zz": "cursor=",
		"cursor=j-1-2-3":    "cursor=",
		"pod=onlyname":      "pod=",
		"cursor=r-fffffff":  "cursor=",
	} {
		var e map[string]string
		if st := a.get("/api/v1/jobs?"+q, &e); st != http.StatusBadRequest || !strings.Contains(e["error"], want) {
			t.Errorf("%s: %d %q, want 400 naming %s", q, st, e["error"], want)
		}
	}
}

// Past --web.max-api-requests a request waits its turn, and gets 503
// when none comes in time; one whose client left frees nothing it did
// not hold.
func TestAPIBoundsConcurrentRequests(t *testing.T) {
	a := &api{slots: make(chan struct{}, 2), queueWait: time.Hour}
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	blocked := a.limited(func(w http.ResponseWriter, r *http.Request) { entered.Done(); <-release })
	var done sync.WaitGroup
	for range 2 {
		done.Go(func() { blocked(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/jobs", nil)) })
	}
	entered.Wait()
	// A third waits: its client gives up first.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	served := false
	a.limited(func(http.ResponseWriter, *http.Request) { served = true })(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/jobs", nil).WithContext(ctx))
	if served {
		t.Error("a third request ran beside two others with a limit of 2")
	}
	if len(a.slots) != 2 {
		t.Errorf("%d slots held, want 2", len(a.slots))
	}
	// A fourth waits for no slot, as both stay held: 503.
	a.queueWait = time.Millisecond
	w := httptest.NewRecorder()
	a.limited(func(http.ResponseWriter, *http.Request) { served = true })(w, httptest.NewRequest("GET", "/api/v1/jobs", nil))
	if served || w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "--web.max-api-requests") {
		t.Errorf("with every slot held: served %v, %d %s; want 503 naming the flag", served, w.Code, w.Body)
	}
	close(release)
	done.Wait()
	a.limited(func(http.ResponseWriter, *http.Request) { served = true })(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/jobs", nil))
	if !served || len(a.slots) != 0 {
		t.Errorf("after the others ended: served %v, %d slots held", served, len(a.slots))
	}
}
