//go:build cgo

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// recorder writes every sample read, as it is read, so that a probe cut
// short still leaves what it saw.
type recorder struct {
	files []*os.File
	inc   *bufio.Writer
	depth *bufio.Writer
}

func newRecorder(dir string) (*recorder, error) {
	r := &recorder{}
	var err error
	if r.inc, err = r.create(filepath.Join(dir, "incremental.csv"), "read_unix_us,pid,sample_unix_us,sm_pct,mem_pct"); err != nil {
		return nil, errors.Join(err, r.close())
	}
	if r.depth, err = r.create(filepath.Join(dir, "depth.csv"), "read_unix_us,depth_s,last_seen_unix_us,pid,sample_unix_us,sm_pct,mem_pct"); err != nil {
		return nil, errors.Join(err, r.close())
	}
	return r, nil
}

func (r *recorder) create(path, header string) (*bufio.Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	r.files = append(r.files, f)
	w := bufio.NewWriter(f)
	_, err = fmt.Fprintln(w, header)
	return w, err
}

func (r *recorder) incremental(readAt uint64, got []sample) error {
	for _, s := range got {
		if _, err := fmt.Fprintf(r.inc, "%d,%d,%d,%d,%d\n", readAt, s.pid, s.micros, s.sm, s.mem); err != nil {
			return err
		}
	}
	return nil
}

func (r *recorder) window(w window) error {
	if len(w.samples) == 0 {
		// An empty answer is a finding too (nothing newer than since).
		_, err := fmt.Fprintf(r.depth, "%d,%g,%d,,,,\n", w.readMicros, w.depth.Seconds(), w.since)
		return err
	}
	for _, s := range w.samples {
		if _, err := fmt.Fprintf(r.depth, "%d,%g,%d,%d,%d,%d,%d\n", w.readMicros, w.depth.Seconds(), w.since, s.pid, s.micros, s.sm, s.mem); err != nil {
			return err
		}
	}
	return nil
}

func (r *recorder) close() error {
	var errs []error
	for _, w := range []*bufio.Writer{r.inc, r.depth} {
		if w != nil {
			errs = append(errs, w.Flush())
		}
	}
	for _, f := range r.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
