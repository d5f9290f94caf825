package wine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestServiceUnderWine runs `gpuwatch.exe service` against Wine 8's
// service manager (services.exe): install stores serve's flags (a JSON
// argv with quotes and backslashes must survive the service's command
// line), start runs serve with the fake nvidia-smi.exe and it serves both
// GPUs, stop ends it with exit code 0, a second service on the taken port
// fails its start with gpuwatch's exit code 1, and uninstall removes them.
// Wine's event log prints each event on its eventlog debug channel at the
// event's type (err, warn, trace): the test reads the log lines there.
// What Wine cannot show is left to the unit tests and the docs: Wine runs
// every service as the prefix's user whatever the account, and does not
// restart a failed service, nor read back its recovery actions.
func TestServiceUnderWine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := newWine(t, ctx)
	exe := w.build(t, ctx, "gpuwatch.exe", "./cmd/gpuwatch")
	smi := w.build(t, ctx, "nvidia-smi.exe", "./internal/fakedriver/fakesmi")

	// A service's environment is the system's, from the registry, not
	// that of the command that starts it; services.exe reads it at its
	// start, so the prefix's wineserver is restarted after.
	fixtures := filepath.Join(w.root, "internal", "backend", "smibackend", "testdata")
	key := `HKLM\System\CurrentControlSet\Control\Session Manager\Environment`
	for name, file := range map[string]string{"FAKESMI_HELP": "help-query-gpu-r550.txt", "FAKESMI_GPUS": "gpu-h100.csv"} {
		run(t, ctx, w.env, w.dir, w.wine, "reg", "add", key, "/v", name, "/d", windowsPath(filepath.Join(fixtures, file)), "/f")
	}
	for _, arg := range []string{"-k", "-w"} { // kill, then wait until it has exited
		server := exec.CommandContext(ctx, filepath.Join(filepath.Dir(w.wine), "wineserver"), arg)
		server.Env = w.env
		_ = server.Run()
	}
	// services.exe keeps the standard error of the command that started
	// it, and passes it to the services: a file, which the test reads (a
	// pipe would stay open after the command).
	env := append(w.env, "WINEDEBUG=-all,+eventlog")
	eventsPath := filepath.Join(w.dir, "events.log")
	events, err := os.Create(eventsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	// A wineserver that outlives its clients (-p): one that exits between
	// two commands of a slow test takes services.exe with it, and the next
	// command's wineserver boots a new one, which starts the automatic
	// service itself, its log going to that command's output.
	for _, boot := range []*exec.Cmd{
		exec.CommandContext(ctx, filepath.Join(filepath.Dir(w.wine), "wineserver"), "-p"),
		exec.CommandContext(ctx, w.wine, "wineboot"),
	} {
		boot.Env, boot.Dir, boot.Stdout, boot.Stderr = env, w.dir, events, events
		if err := boot.Run(); err != nil {
			t.Fatalf("%s: %v", boot, err)
		}
	}

	service := func(args ...string) (string, int) {
		t.Helper()
		return wineExit(t, ctx, w, exe, append([]string{"service"}, args...)...)
	}
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	command := `["` + strings.ReplaceAll(windowsPath(smi), `\`, `\\`) + `"]`
	out, code := service("install", "--web.listen-address="+addr, "--nvidia-smi.command="+command,
		// Each collection starts a Windows process under Wine, which a
		// busy machine makes slow; a value of its own, to see it stored.
		"--collection.timeout=20s")
	if code != 0 || !strings.Contains(out, "installed service gpuwatch (account NT AUTHORITY\\LocalService, starts at boot)") {
		t.Fatalf("service install: exit %d\n%s", code, out)
	}
	out, code = service("start")
	if code != 0 || out != "service gpuwatch is running\n" {
		t.Fatalf("service start: exit %d\n%s\nevents:\n%s", code, out, readFile(eventsPath))
	}
	// The failure says what the page and the event log say: both GPUs
	// down is another failure than no service.
	testenv.Eventually(t, 2*time.Minute, func() error {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return fmt.Errorf("%v\nevents:\n%s", err, readFile(eventsPath))
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		page := string(body)
		if strings.Contains(page, `gpu_up{gpu="0",uuid="GPU-2f4a8e61-7c3b-4d0e-9a15-60b1c2d3e4f5"} 1`) &&
			strings.Contains(page, `gpu_up{gpu="1",uuid="GPU-8b1d9c02-3e4f-4a5b-8c6d-7e8f90a1b2c3"} 1`) {
			return nil
		}
		var lines []string
		for line := range strings.Lines(page) {
			if strings.HasPrefix(line, "gpu_up") || strings.HasPrefix(line, "gpuwatch_collection") {
				lines = append(lines, line)
			}
		}
		return fmt.Errorf("the service does not serve both GPUs up; its page says:\n%s\nevents:\n%s", strings.Join(lines, ""), readFile(eventsPath))
	})
	out, code = service("status")
	for _, want := range []string{"state:    running", `account:  NT AUTHORITY\LocalService`, "start:    automatic (at boot)",
		// The JSON list as Windows' command-line quoting writes it.
		`--nvidia-smi.command=[\"` + strings.ReplaceAll(windowsPath(smi), `\`, `\\`) + `\"]`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("service status: exit %d, want %q in:\n%s", code, want, out)
		}
	}
	// Wine 8's QueryServiceConfig2 does not implement the recovery
	// actions' level: status must say so rather than print none.
	if !strings.Contains(out, "recovery: restart after 5s, restart after 30s, restart after 2m0s\n") &&
		!strings.Contains(out, "recovery: not readable (Invalid level.)\n") {
		t.Errorf("service status: neither the recovery actions nor why they are not shown:\n%s", out)
	}

	// A second service on the same port: serve cannot listen, the start
	// says so, and the service stopped with gpuwatch's exit code 1.
	out, code = service("install", "--service.name=gpuwatch-taken", "--web.listen-address="+addr)
	if code != 0 {
		t.Fatalf("service install --service.name=gpuwatch-taken: exit %d\n%s", code, out)
	}
	out, code = service("start", "--service.name=gpuwatch-taken")
	if code != 1 || !strings.Contains(out, `service "gpuwatch-taken" stopped right after its start (gpuwatch's exit code 1)`) {
		t.Errorf("service start on a taken port: exit %d, want 1 and the exit code named:\n%s", code, out)
	}
	if out, code = service("uninstall", "--service.name=gpuwatch-taken"); code != 0 {
		t.Errorf("service uninstall --service.name=gpuwatch-taken: exit %d\n%s", code, out)
	}

	out, code = service("stop")
	if code != 0 || !strings.Contains(out, "service gpuwatch stopped") {
		t.Errorf("service stop: exit %d\n%s", code, out)
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("%s still answers after service stop", addr)
	}
	if out, code = service("status"); code != 0 || !strings.Contains(out, "state:    stopped (exit code 0)") {
		t.Errorf("service status after stop: exit %d, want stopped with exit code 0:\n%s", code, out)
	}
	if out, code = service("uninstall"); code != 0 || !strings.Contains(out, "removed service gpuwatch") {
		t.Errorf("service uninstall: exit %d\n%s", code, out)
	}
	if out, code = service("status"); code != 1 || !strings.Contains(out, `no service "gpuwatch"`) {
		t.Errorf("service status after uninstall: exit %d, want 1 and no service:\n%s", code, out)
	}

	// The services' log, as Wine's event log printed it, each line at its
	// level's event type.
	log := readFile(eventsPath)
	for _, want := range []string{
		`trace:eventlog:ReportEventW L"time=`,
		`level=INFO source=tls_config.go`,
		`msg=\"gpuwatch started\"`,
		`level=INFO source=service.go`,
		`the Windows service manager asked gpuwatch to stop`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the event log lacks %q:\n%s", want, log)
		}
	}
	if !hasLine(log, "err:eventlog:ReportEventW", "level=ERROR", "serve ended; the service stops with an error") {
		t.Errorf("the taken port's failure is not an error event:\n%s", log)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// hasLine reports whether one line of text holds every part.
func hasLine(text string, parts ...string) bool {
	for line := range strings.Lines(text) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
