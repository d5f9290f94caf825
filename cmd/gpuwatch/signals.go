package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// ignoreHangup keeps SIGHUP from ending a long-running command (its
// default action), as a reload signal sent by habit or by a closing
// terminal would otherwise do, silently. Each SIGHUP is logged with what
// does and does not take effect without a restart. The returned func
// restores the default.
func ignoreHangup(logger *slog.Logger, note string) (restore func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				logger.Warn("SIGHUP received and ignored: gpuwatch has no configuration to reload; " + note)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
