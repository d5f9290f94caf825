package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/attribution"
	"github.com/gpuwatch/gpuwatch/internal/pipeline"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

func stackWith(t *testing.T, args ...string) (*stack, error) {
	t.Helper()
	return stackOf(t, "h100", args...)
}

// stackOf builds the stack of the simulator's profile with args.
func stackOf(t *testing.T, profile string, args ...string) (*stack, error) {
	t.Helper()
	app := kingpin.New("test", "")
	f := registerCommonFlags(app)
	if _, err := app.Parse(append([]string{"--backend=sim", "--sim.profile=" + profile, "--no-attribution"}, args...)); err != nil {
		t.Fatal(err)
	}
	return f.buildStack(slog.New(slog.DiscardHandler))
}

// Nonsensical accounting flags are refused at start, naming the flag.
func TestAccountingFlagsChecked(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"--accounting.interval=100ms", "--accounting.interval=100ms: must be at least 500ms"},
		{"--accounting.retention=30s", "--accounting: retention 30s must be longer than the new-owner hold 1m0s"},
		{"--accounting.idle-threshold=2", "--accounting: idle threshold 2 is not a ratio"},
	} {
		st, err := stackWith(t, c.arg)
		if err == nil {
			_ = st.Close()
			t.Errorf("%s accepted", c.arg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.arg, err, c.want)
		}
	}
}

// serve runs the accounting by default: its totals reach the snapshots
// the outputs render, and --no-accounting leaves them out.
func TestServeRunsAccounting(t *testing.T) {
	st, err := stackWith(t, "--accounting.interval=500ms", "--accounting.new-owner-hold=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testenv.WaitFor(t, 30*time.Second, "the h100's process in the accounting totals", func() bool {
		s, err := st.pipeline.Snapshot(context.Background())
		return err == nil && s.Accounting != nil && len(s.Accounting.Owners) == 1 && s.Accounting.Owners[0].Seconds > 0
	})

	off, err := stackWith(t, "--no-accounting")
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	s, err := off.pipeline.Snapshot(context.Background())
	if err != nil || s.Accounting != nil {
		t.Errorf("--no-accounting: snapshot accounting %+v (err %v), want none", s.Accounting, err)
	}
}

// textfile without --interval writes one reading and exits: no accounting
// (its second reader and XID watcher cost the command half a second at
// exit and integrated nothing); with --interval it accounts as serve does.
func TestOneShotTextfileRunsNoAccounting(t *testing.T) {
	for _, c := range []struct {
		interval string
		want     bool
	}{{"0s", false}, {"1s", true}} {
		app, cmds := newApp()
		args := []string{"textfile", "--output=" + filepath.Join(t.TempDir(), "gpu.prom"), "--interval=" + c.interval,
			"--backend=sim", "--sim.profile=h100", "--no-attribution", "--accounting.interval=500ms", "--accounting.new-owner-hold=1s"}
		if _, err := app.Parse(args); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(cmds, func(c command) bool { return c.name() == "textfile" })
		tf := cmds[i].(*textfileCommand)
		tf.setReadMode()
		st, err := tf.common.buildStack(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if c.want {
			testenv.WaitFor(t, 30*time.Second, "the h100's process in the accounting totals", func() bool {
				s, err := st.pipeline.Snapshot(context.Background())
				return err == nil && s.Accounting != nil && len(s.Accounting.Owners) == 1
			})
		} else if s, err := st.pipeline.Snapshot(context.Background()); err != nil || s.Accounting != nil {
			t.Errorf("textfile --interval=%s: snapshot accounting %+v (err %v), want none", c.interval, s.Accounting, err)
		}
		_ = st.Close()
	}
}

// With job records on, the accounting's reader counts XIDs through the
// scrapes' reader's watcher: one waiting goroutine per GPU, as with the
// accounting off, not two. Both count the same events.
func TestRecordsShareTheScrapesXIDWatcher(t *testing.T) {
	testenv.WaitFor(t, 10*time.Second, "earlier tests' XID waiters to end", func() bool { return xidWaiters() == 0 })
	off, err := stackOf(t, "dgx-h100", "--no-accounting")
	if err != nil {
		t.Fatal(err)
	}
	perGPU := xidWaiters()
	_ = off.Close()
	if perGPU == 0 {
		t.Fatal("no XID waiter runs with the accounting off: nothing to compare")
	}
	testenv.WaitFor(t, 10*time.Second, "the stack's XID waiters to end", func() bool { return xidWaiters() == 0 })

	st, err := stackOf(t, "dgx-h100", "--accounting.dir="+t.TempDir(), "--accounting.interval=500ms")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.jobs == nil {
		t.Fatal("job records are off: the accounting's reader reads no XIDs")
	}
	if n := xidWaiters(); n != perGPU {
		t.Errorf("%d XID waiters with job records on, want %d (one per GPU, as with the accounting off)", n, perGPU)
	}
}

// xidWaiters counts the goroutines the XID watchers started to wait for
// events (by their creator: one not yet scheduled shows no frame of its own).
func xidWaiters() int {
	buf := make([]byte, 1<<22)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "created by github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend.startXIDWatcher")
}

// The ticks' attribution is the scrapes' one, viewed with the accounting's
// allocation age; other enrichers are used as they are.
func TestTickEnrichersViewTheAttributor(t *testing.T) {
	at, err := attribution.New(attribution.Options{ProcRoot: t.TempDir(), RootFS: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	other := &nopEnricher{}
	got := tickEnrichers([]pipeline.Enricher{at, other})
	if _, ok := got[0].(*attribution.AgedAttributor); !ok {
		t.Errorf("the attributor became %T, want its *attribution.AgedAttributor view", got[0])
	}
	if len(got) != 2 || got[1] != pipeline.Enricher(other) {
		t.Errorf("tickEnrichers = %v, want the other enricher kept", got)
	}
}

type nopEnricher struct{}

func (*nopEnricher) Enrich(context.Context, *snapshot.Snapshot) {}
