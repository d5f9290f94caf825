package jobs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// maxRecordLine is the longest journal line read as a record; a longer one
// is skipped, as a torn one is, and the rest of the journal still reads.
const maxRecordLine = 16 << 20

// journalIndex knows where each record of the journal files lies, by job
// ID, so that one job's answer reads that job's lines alone and a page of
// the list reads that page's lines alone: an API request costs what it
// answers, not the journal's size.
//
// A file is known by its device, inode and first line, which rotation (a
// rename) keeps and a new file on a reused inode does not, and is indexed up to its last complete line: what the writer appends
// later is indexed at the next request, and a file rotated out of the
// journal is forgotten. The journal is append-only, so what was indexed
// stays where it was; a file found shorter than indexed is indexed anew.
type journalIndex struct {
	dir string

	mu    sync.Mutex
	files map[fileKey]*indexedFile
	// first is, per record identity (Record.Identity), its first copy in
	// the journal: a record written twice (a crash between the journal's
	// write and the checkpoint's) is answered once, as ReadJournal reads
	// it.
	first map[RecordIdentity]entryPos
}

type fileKey struct{ dev, ino, head uint64 }

type entryPos struct {
	file fileKey
	i    int
}

type indexedFile struct {
	scanned int64 // bytes indexed: up to the end of a complete line
	entries []indexEntry
	byID    map[string][]int
}

// indexEntry is one record's line and what the API filters on.
type indexEntry struct {
	off      int64
	n        int // without the newline
	id, kind string
	pod      string // "namespace/name", or empty
	end      time.Time
	identity RecordIdentity
}

// lineRef is a record's line in one of the files a request opened.
type lineRef struct {
	file int
	off  int64
	n    int
}

func newJournalIndex(dir string) *journalIndex {
	return &journalIndex{dir: dir, files: map[fileKey]*indexedFile{}, first: map[RecordIdentity]entryPos{}}
}

// journalPaths are the journal's files, oldest first.
func journalPaths(dir string) []string {
	matches, _ := filepath.Glob(filepath.Join(dir, JournalName+".*"))
	var rotated []int
	for _, m := range matches {
		if n, err := strconv.Atoi(filepath.Ext(m)[1:]); err == nil && n > 0 {
			rotated = append(rotated, n)
		}
	}
	// The highest number is the oldest.
	slices.SortFunc(rotated, func(a, b int) int { return b - a })
	paths := make([]string, 0, len(rotated)+1)
	for _, n := range rotated {
		paths = append(paths, filepath.Join(dir, JournalName+"."+strconv.Itoa(n)))
	}
	return append(paths, filepath.Join(dir, JournalName))
}

// openedJournal is the journal's files as one request sees them, oldest
// first; close it when done.
type openedJournal struct {
	files []*os.File
	keys  []fileKey
}

func (o *openedJournal) close() {
	for _, f := range o.files {
		_ = f.Close()
	}
}

// readLine reads a record's line (without its newline).
func (o *openedJournal) readLine(ref lineRef) ([]byte, error) {
	buf := make([]byte, ref.n)
	if _, err := o.files[ref.file].ReadAt(buf, ref.off); err != nil {
		if pe, ok := errors.AsType[*os.PathError](err); ok {
			err = pe.Err // the API's errors name no path of the server
		}
		return nil, fmt.Errorf("reading journal file %s: %w", filepath.Base(o.files[ref.file].Name()), err)
	}
	return buf, nil
}

// open opens the journal's files and brings the index up to date with
// them. Call with mu held.
func (x *journalIndex) open() (*openedJournal, error) {
	o := &openedJournal{}
	changed := false
	for _, p := range journalPaths(x.dir) {
		f, err := openPathNoFollow(p)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			// Gone, or a link where a journal file goes: no records.
			continue
		}
		if err != nil {
			o.close()
			return nil, fmt.Errorf("journal file %s: %w", filepath.Base(p), err)
		}
		key, size, regular := statKey(f)
		if !regular {
			// Not a journal file (a directory left where a rotated file
			// goes): it holds no records.
			_ = f.Close()
			continue
		}
		c, err := x.update(f, key, size)
		if err != nil {
			_ = f.Close()
			o.close()
			return nil, fmt.Errorf("journal file %s: %w", filepath.Base(p), err)
		}
		changed = changed || c
		o.files, o.keys = append(o.files, f), append(o.keys, key)
	}
	if len(x.files) != len(o.keys) {
		for k := range x.files {
			if !slices.Contains(o.keys, k) {
				delete(x.files, k)
			}
		}
		changed = true
	}
	if changed {
		x.relink(o.keys)
	}
	return o, nil
}

func statKey(f *os.File) (key fileKey, size int64, regular bool) {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return key, 0, false
	}
	if dev, ino, ok := fileIdentity(fi); ok {
		key = fileKey{dev: dev, ino: ino, head: headHash(f)}
	}
	return key, fi.Size(), true
}

// headHash hashes the file's first line (its first 4 KiB when longer),
// which stays as it is once written: the journal is append-only.
func headHash(f *os.File) uint64 {
	var buf [4096]byte
	n, _ := f.ReadAt(buf[:], 0)
	head := buf[:n]
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	h := fnv.New64a()
	_, _ = h.Write(head)
	return h.Sum64()
}

// update indexes what f gained since the last request; it says whether
// a file was indexed anew (so that first must be rebuilt).
func (x *journalIndex) update(f *os.File, key fileKey, size int64) (rebuilt bool, err error) {
	ix := x.files[key]
	if ix == nil || size < ix.scanned {
		ix = &indexedFile{byID: map[string][]int{}}
		x.files[key] = ix
		rebuilt = true
	}
	if size == ix.scanned {
		return rebuilt, nil
	}
	first := len(ix.entries)
	if err := ix.scan(f, size); err != nil {
		return rebuilt, err
	}
	if !rebuilt {
		for i := first; i < len(ix.entries); i++ {
			x.noteFirst(ix.entries[i].identity, entryPos{file: key, i: i})
		}
	}
	return rebuilt, nil
}

// relink rebuilds first over the files in order, oldest first.
func (x *journalIndex) relink(order []fileKey) {
	clear(x.first)
	for _, k := range order {
		for i, e := range x.files[k].entries {
			x.noteFirst(e.identity, entryPos{file: k, i: i})
		}
	}
}

func (x *journalIndex) noteFirst(id RecordIdentity, p entryPos) {
	if _, ok := x.first[id]; !ok {
		x.first[id] = p
	}
}

// recordHead is what the index keeps of a record.
type recordHead struct {
	ID    string    `json:"id"`
	Kind  string    `json:"kind"`
	Node  string    `json:"node"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Pod   *struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"pod"`
}

// scan indexes the complete lines of f from ix.scanned up to size. Lines
// that are not a record (a torn one, one too long) are passed over, as
// ReadJournal does.
func (ix *indexedFile) scan(f *os.File, size int64) error {
	r := bufio.NewReaderSize(io.NewSectionReader(f, ix.scanned, size-ix.scanned), 64<<10)
	off := ix.scanned
	var long []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !tooLong && len(long)+len(chunk) <= maxRecordLine {
				long = append(long, chunk...)
			} else {
				tooLong, long = true, nil
			}
			off += int64(len(chunk))
			continue
		case errors.Is(err, io.EOF):
			// A line without its newline yet: the writer is at it, or it
			// is torn. Index it once it is complete.
			return nil
		case err != nil:
			return err
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
		}
		start := off - int64(len(line)-len(chunk))
		if tooLong {
			start = -1
		}
		off += int64(len(chunk))
		if start >= 0 {
			ix.add(line[:len(line)-1], start)
		}
		ix.scanned, long, tooLong = off, nil, false
	}
}

func (ix *indexedFile) add(line []byte, off int64) {
	var h recordHead
	if json.Unmarshal(line, &h) != nil || h.ID == "" {
		return
	}
	e := indexEntry{off: off, n: len(line), id: h.ID, kind: h.Kind, end: h.End,
		identity: RecordIdentity{Node: h.Node, Kind: h.Kind, ID: h.ID, Start: h.Start.UTC()}}
	if h.Pod != nil {
		e.pod = h.Pod.Namespace + "/" + h.Pod.Name
	}
	ix.byID[h.ID] = append(ix.byID[h.ID], len(ix.entries))
	ix.entries = append(ix.entries, e)
}

func (x *journalIndex) isFirst(k fileKey, i int, e *indexEntry) bool {
	return x.first[e.identity] == entryPos{file: k, i: i}
}

// job returns the lines of one job's records, oldest first.
func (x *journalIndex) job(id string) (*openedJournal, []lineRef, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	o, err := x.open()
	if err != nil {
		return nil, nil, err
	}
	var refs []lineRef
	for fi, k := range o.keys {
		ix := x.files[k]
		for _, i := range ix.byID[id] {
			if e := &ix.entries[i]; x.isFirst(k, i, e) {
				refs = append(refs, lineRef{file: fi, off: e.off, n: e.n})
			}
		}
	}
	return o, refs, nil
}

// listFilter is what /api/v1/jobs keeps.
type listFilter struct {
	kind, pod string
	since     time.Time // records that ended at or after it; zero: all
}

func (f listFilter) keeps(kind, pod string, end time.Time) bool {
	return (f.kind == "" || kind == f.kind) && (f.pod == "" || pod == f.pod) && (f.since.IsZero() || !end.Before(f.since))
}

// journalCursor is where a page of the list ends: after the record at
// off in the file key.
type journalCursor struct {
	key fileKey
	off int64
}

// page returns the lines of up to limit records that filter keeps, after
// the cursor (nil: from the oldest), holding no more than maxBytes of
// lines (one record at least); more says whether other records follow.
// A cursor whose file has left the journal starts at the oldest record:
// that file was older than any left.
func (x *journalIndex) page(filter listFilter, after *journalCursor, limit int, maxBytes int) (o *openedJournal, refs []lineRef, next journalCursor, more bool, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	o, err = x.open()
	if err != nil {
		return nil, nil, next, false, err
	}
	startFile := 0
	if after != nil {
		startFile = max(0, slices.Index(o.keys, after.key))
	}
	total := 0
	for fi := startFile; fi < len(o.keys); fi++ {
		k := o.keys[fi]
		ix := x.files[k]
		for i := range ix.entries {
			e := &ix.entries[i]
			if (after != nil && k == after.key && e.off <= after.off) || !filter.keeps(e.kind, e.pod, e.end) || !x.isFirst(k, i, e) {
				continue
			}
			if len(refs) >= limit || (len(refs) > 0 && total+e.n > maxBytes) {
				return o, refs, next, true, nil
			}
			refs = append(refs, lineRef{file: fi, off: e.off, n: e.n})
			total += e.n
			next = journalCursor{key: k, off: e.off}
		}
	}
	return o, refs, next, false, nil
}
