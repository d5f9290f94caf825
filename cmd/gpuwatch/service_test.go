package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
)

// serviceCmd returns the parsed app's service command of verb.
func serviceCmd(t *testing.T, cmds []command, verb string) *serviceCommand {
	t.Helper()
	for _, c := range cmds {
		if s, ok := c.(*serviceCommand); ok && s.verb == verb {
			return s
		}
	}
	t.Fatalf("no service %s command", verb)
	return nil
}

// flagValues is every application flag's value after a parse.
func flagValues(app *kingpin.Application) map[string]string {
	out := map[string]string{}
	for _, f := range app.Model().Flags {
		out[f.Name] = f.String()
	}
	return out
}

// The argv install stores parses back into the same serve flags: values
// with spaces, quotes and JSON, bools both ways, flags before and after
// the command; the service commands' own flags are not passed to serve.
func TestServiceInstallArgvRoundTrip(t *testing.T) {
	args := []string{
		"--web.listen-address=127.0.0.1:9410", "service", "install",
		"--service.name=gpuwatch-remote", "--service.account=NetworkService",
		"--no-web.ui", "--collector.processes.pid-labels",
		`--nvidia-smi.command=["C:\\Program Files\\ssh.exe","-o","BatchMode=yes","gpu box","nvidia-smi"]`,
		"--collection.timeout", "3s", "--log.level=debug", "--compat=dcgm,native",
	}
	app, cmds := newApp()
	if chosen, err := app.Parse(args); err != nil || chosen != "service install" {
		t.Fatalf("parse: %q, %v", chosen, err)
	}
	install := serviceCmd(t, cmds, "install")
	if install.flags.name != "gpuwatch-remote" || install.flags.account != "NetworkService" {
		t.Fatalf("service flags %+v", install.flags)
	}
	argv := serviceArgv(install.flags.name, install.flags.serveArgs)
	for _, a := range argv {
		if strings.HasPrefix(a, "--service.account") {
			t.Errorf("argv %q passes the install-only flag %s to the service", argv, a)
		}
	}

	again, cmds2 := newApp()
	chosen, err := again.Parse(argv)
	if err != nil || chosen != "service run" {
		t.Fatalf("the stored argv %q: %q, %v", argv, chosen, err)
	}
	if got := serviceCmd(t, cmds2, "run").flags.name; got != "gpuwatch-remote" {
		t.Errorf("service run's --service.name = %q, want gpuwatch-remote", got)
	}
	want, got := flagValues(app), flagValues(again)
	for name, v := range want {
		if got[name] != v {
			t.Errorf("--%s: %q at install, %q in the service (argv %q)", name, v, got[name], argv)
		}
	}
	// The comparison above holds only if the flags were set at all.
	for name, v := range map[string]string{"web.ui": "false", "collection.timeout": "3s", "web.listen-address": "127.0.0.1:9410",
		"nvidia-smi.command": `["C:\\Program Files\\ssh.exe","-o","BatchMode=yes","gpu box","nvidia-smi"]`} {
		if got[name] != v {
			t.Errorf("--%s in the service = %q, want %q", name, got[name], v)
		}
	}
}

// A flag given twice is stored twice, in order: the last one wins on both
// sides.
func TestServiceArgvKeepsOrder(t *testing.T) {
	app, _ := newApp()
	ctx, err := app.ParseContext([]string{"service", "install", "--log.level=debug", "--web.ui", "--log.level=warn", "--no-web.ui"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--log.level=debug", "--web.ui", "--log.level=warn", "--no-web.ui"}
	if got := serveArgsOf(ctx); !slices.Equal(got, want) {
		t.Errorf("serveArgsOf = %q, want %q", got, want)
	}
}

func TestServiceNameChecked(t *testing.T) {
	for name, want := range map[string]string{
		"":                       "--service.name: empty",
		`a\b`:                    "cannot hold",
		"a/b":                    "cannot hold",
		strings.Repeat("x", 257): "at most 256",
		"gpuwatch-2":             "",
	} {
		err := checkServiceName(name)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("checkServiceName(%.20q) = %v, want %q", name, err, want)
		}
	}
}

// A relative path to an existing file is refused with its absolute form;
// absolute paths and values that name nothing pass.
func TestServicePathsMustBeAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("web.yml", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := checkServePaths([]string{"--web.listen-address=:9410", "--web.config.file=web.yml"})
	if err == nil || !strings.Contains(err.Error(), "--web.config.file=web.yml: a relative path") || !strings.Contains(err.Error(), filepath.Join(dir, "web.yml")) {
		t.Errorf("relative --web.config.file: %v", err)
	}
	if err := checkServePaths([]string{"--web.config.file=" + filepath.Join(dir, "web.yml"), "--web.telemetry-path=/metrics", "--web.ui"}); err != nil {
		t.Errorf("absolute paths refused: %v", err)
	}
}

// statusRecorder collects what the loop reports, for the test to wait on.
type statusRecorder struct{ c chan serviceStatus }

func (r statusRecorder) report(s serviceStatus) { r.c <- s }

func (r statusRecorder) next(t *testing.T, want serviceState) serviceStatus {
	t.Helper()
	select {
	case s := <-r.c:
		if s.state != want {
			t.Fatalf("reported state %d, want %d", s.state, want)
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("no report of state %d", want)
	}
	return serviceStatus{}
}

// logBuffer is a logger whose lines the test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func runLoop(serve func(context.Context) error) (chan serviceRequest, statusRecorder, chan uint32, *logBuffer) {
	requests, rec, exit, logs := make(chan serviceRequest), statusRecorder{make(chan serviceStatus, 16)}, make(chan uint32, 1), &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	go func() { exit <- serviceLoop(requests, rec.report, serve, 2*time.Second, logger) }()
	return requests, rec, exit, logs
}

// Start → Running (accepting Stop and Shutdown); Interrogate → Running
// again; Stop → StopPending while serve drains (answering Interrogate
// with StopPending) → serve's context cancelled → exit code 0.
func TestServiceLoopStartStop(t *testing.T) {
	{
		cancelled, release := make(chan struct{}), make(chan struct{})
		requests, rec, exit, logs := runLoop(func(ctx context.Context) error {
			<-ctx.Done()
			close(cancelled)
			<-release // a scrape still draining
			return nil
		})
		rec.next(t, serviceStartPending)
		if s := rec.next(t, serviceRunning); !s.acceptsStop {
			t.Errorf("Running without accepting Stop: %+v", s)
		}
		requests <- serviceInterrogate
		rec.next(t, serviceRunning)
		requests <- serviceOther
		requests <- serviceInterrogate
		rec.next(t, serviceRunning)
		select {
		case <-cancelled:
			t.Fatal("serve's context was cancelled before Stop")
		default:
		}

		requests <- serviceStop
		if s := rec.next(t, serviceStopPending); s.waitHint < 2*time.Second || s.acceptsStop {
			t.Errorf("StopPending %+v: want a wait hint past the drain, and no Stop accepted", s)
		}
		<-cancelled
		requests <- serviceInterrogate
		rec.next(t, serviceStopPending)
		select {
		case code := <-exit:
			t.Fatalf("the loop returned %d before serve did", code)
		default:
		}
		close(release)
		if code := <-exit; code != serviceExitOK {
			t.Errorf("exit code %d after a requested stop, want %d", code, serviceExitOK)
		}
		if !strings.Contains(logs.String(), "asked gpuwatch to stop") {
			t.Errorf("the stop is not logged:\n%s", logs)
		}
	}
}

// serve ending by itself (it cannot listen) or failing while it stops is
// the service's failure, logged as an error: exit code 1, on which the
// recovery actions restart it.
func TestServiceLoopServeFails(t *testing.T) {
	_, rec, exit, logs := runLoop(func(context.Context) error { return errors.New("listen tcp :9410: bind: address already in use") })
	rec.next(t, serviceStartPending)
	rec.next(t, serviceRunning)
	if code := <-exit; code != serviceExitFailed {
		t.Errorf("exit code %d, want %d", code, serviceExitFailed)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "address already in use") {
		t.Errorf("the failure is not logged as an error:\n%s", l)
	}

	requests, rec, exit, logs := runLoop(func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("closing the stack: journal: disk full")
	})
	rec.next(t, serviceStartPending)
	rec.next(t, serviceRunning)
	requests <- serviceStop
	rec.next(t, serviceStopPending)
	if code := <-exit; code != serviceExitFailed {
		t.Errorf("exit code %d after a failed stop, want %d", code, serviceExitFailed)
	}
	if !strings.Contains(logs.String(), "disk full") {
		t.Errorf("the failed stop is not logged:\n%s", logs)
	}
}

// The event log files each line promslog writes at its level, in every
// format and style promslog has.
func TestLogLineLevel(t *testing.T) {
	for _, format := range []string{"logfmt", "json"} {
		for _, style := range []promslog.LogStyle{promslog.SlogStyle, promslog.GoKitStyle} {
			var buf bytes.Buffer
			cfg := &promslog.Config{Level: promslog.NewLevel(), Format: promslog.NewFormat(), Style: style, Writer: &buf}
			if err := cfg.Level.Set("debug"); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Format.Set(format); err != nil {
				t.Fatal(err)
			}
			logger := promslog.New(cfg)
			want := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo}
			logger.Debug("d")
			logger.Info("a message that says level=ERROR")
			logger.Warn("w")
			logger.Error("e", "err", "level=INFO")
			buf.WriteString("a line of no logger\n")
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			if len(lines) != len(want) {
				t.Fatalf("%s %v: %d lines:\n%s", format, style, len(lines), buf.String())
			}
			for i, l := range lines {
				if got := logLineLevel([]byte(l)); got != want[i] {
					t.Errorf("%s: level %v, want %v", l, got, want[i])
				}
			}
		}
	}
}
