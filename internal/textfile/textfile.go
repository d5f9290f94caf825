// Package textfile writes metrics for node_exporter's textfile collector.
//
// node_exporter reads every *.prom file in its directory on each scrape, so
// a reader must never see a half-written file: each write goes to a
// temporary file in the same directory, is synced, and is renamed over the
// target, which is atomic on POSIX filesystems.
package textfile

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Write gathers g once and atomically replaces path with the text exposition.
func Write(g prometheus.Gatherer, path string) error {
	if !strings.HasSuffix(path, ".prom") {
		// node_exporter ignores other names; failing loudly saves an hour of
		// wondering why nothing shows up.
		return fmt.Errorf("textfile output %q: node_exporter only reads files ending in .prom", path)
	}
	families, gatherErr := g.Gather()
	if len(families) == 0 && gatherErr != nil {
		return fmt.Errorf("gathering metrics: %w", gatherErr)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			return fmt.Errorf("encoding %s: %w", mf.GetName(), err)
		}
	}
	if err := writeAtomic(path, buf.Bytes()); err != nil {
		return err
	}
	// A partial gather is still written (the collectors that worked are
	// worth having) but reported.
	return gatherErr
}

// tempPattern is the name of path's temporary files, for os.CreateTemp.
func tempPattern(path string) string { return "." + filepath.Base(path) + ".tmp-*" }

// RemoveStaleTemps removes the temporary files of path that an earlier run
// killed between create and rename (SIGKILL, OOM, power loss) left behind;
// nothing else removes them. Call it before the first write. Only names of
// gpuwatch's own pattern for this output are touched.
func RemoveStaleTemps(path string) (int, error) {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	// Matched by prefix, not by glob: the output's name may hold glob
	// characters.
	prefix := strings.TrimSuffix(tempPattern(path), "*")
	removed := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// WriteAtomic writes data to path through a synced temporary file in the
// same directory and a rename, so a reader sees the old file or the whole new
// one, never a part (gpuwatch report --output uses it too).
func WriteAtomic(path string, data []byte) error { return writeAtomic(path, data) }

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return fmt.Errorf("creating temporary file next to %s: %w", path, err)
	}
	cleanup := func() { _ = os.Remove(tmp.Name()) }
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		cleanup()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		cleanup()
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		cleanup()
		return fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		cleanup()
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		cleanup()
		return fmt.Errorf("renaming into %s: %w", path, err)
	}
	return nil
}

// Loop writes every interval until ctx ends. A failed write is logged and
// retried at the next tick; the previous complete file stays in place.
func Loop(ctx context.Context, g prometheus.Gatherer, path string, interval time.Duration, logger *slog.Logger) error {
	if interval <= 0 {
		return fmt.Errorf("interval must be positive, got %s", interval)
	}
	if err := Write(g, path); err != nil {
		logger.Error("writing textfile", "path", path, "err", err)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := Write(g, path); err != nil {
				logger.Error("writing textfile", "path", path, "err", err)
			}
		}
	}
}
