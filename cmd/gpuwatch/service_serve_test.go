//go:build cgo && !windows

package main

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The service's loop around the real serve (the simulator behind it):
// serve answers while Running, and Stop ends it the way SIGTERM does,
// closing the port, with exit code 0.
func TestServiceLoopRunsServe(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	app, cmds := newApp()
	if _, err := app.Parse([]string{"service", "run", "--backend=sim", "--sim.profile=h100", "--no-attribution",
		"--web.listen-address=" + addr, "--log.level=error"}); err != nil {
		t.Fatal(err)
	}
	run := serviceCmd(t, cmds, "run")
	requests, rec, exit := make(chan serviceRequest), statusRecorder{make(chan serviceStatus, 16)}, make(chan uint32, 1)
	go func() {
		exit <- serviceLoop(requests, rec.report, run.serve.serve, shutdownDrain(run.serve.common.timeout), slog.New(slog.DiscardHandler))
	}()
	rec.next(t, serviceStartPending)
	rec.next(t, serviceRunning)
	testenv.WaitFor(t, 30*time.Second, "serve to answer with the simulated GPU", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return err == nil && strings.Contains(string(body), `gpu_up{gpu="0"`)
	})
	requests <- serviceStop
	rec.next(t, serviceStopPending)
	select {
	case code := <-exit:
		if code != serviceExitOK {
			t.Errorf("exit code %d, want %d", code, serviceExitOK)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("%s still answers after the service stopped", addr)
	}
}
