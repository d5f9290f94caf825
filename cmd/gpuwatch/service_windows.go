package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"github.com/prometheus/common/promslog"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/eventlog"
	"golang.org/x/sys/windows/svc/mgr"
)

// The service manager's side of `gpuwatch service` (golang.org/x/sys's
// svc, svc/mgr and svc/eventlog); the logic it calls is in service.go.

// serviceAccounts are the accounts --service.account takes, as the service
// manager names them. None has a password to store.
var serviceAccounts = map[string]string{
	"LocalService":   `NT AUTHORITY\LocalService`,
	"NetworkService": `NT AUTHORITY\NetworkService`,
	"LocalSystem":    "LocalSystem",
}

// serviceRecovery is what the service manager does after the service
// fails, whether it crashed or stopped with an error: restart it, sooner
// the first time; a day without failure starts the count again.
var serviceRecovery = []mgr.RecoveryAction{
	{Type: mgr.ServiceRestart, Delay: 5 * time.Second},
	{Type: mgr.ServiceRestart, Delay: 30 * time.Second},
	{Type: mgr.ServiceRestart, Delay: 2 * time.Minute},
}

const serviceRecoveryReset = 24 * 60 * 60 // seconds

// serviceWait bounds how long start and stop wait for the state they
// asked for.
const serviceWait = time.Minute

// serviceSettle is how long start watches a service that said Running
// before it reports success: long enough for serve to fail on its flags
// or its listen address.
const serviceSettle = 3 * time.Second

func (c *serviceCommand) run() error {
	if err := checkServiceName(c.flags.name); err != nil {
		return err
	}
	switch c.verb {
	case "install":
		return c.install()
	case "uninstall":
		return c.uninstall()
	case "start":
		return c.start()
	case "stop":
		return c.stop()
	case "status":
		return c.status()
	case "run":
		return c.runService()
	}
	return fmt.Errorf("gpuwatch service %s: no such command", c.verb)
}

// connect opens the service manager; changing services needs an
// administrator.
func connect() (*mgr.Mgr, error) {
	m, err := mgr.Connect()
	if err != nil {
		if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
			return nil, fmt.Errorf("the service manager: %w (run this from an elevated prompt: Run as administrator)", err)
		}
		return nil, fmt.Errorf("the service manager: %w", err)
	}
	return m, nil
}

// withService connects to the service manager, opens the named service
// (saying how to install it when it is not there) and runs do on it,
// closing both handles after.
func (c *serviceCommand) withService(do func(*mgr.Service) error) error {
	m, err := connect()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	s, err := m.OpenService(c.flags.name)
	if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
		return fmt.Errorf("no service %q (gpuwatch service install installs it; --service.name names another)", c.flags.name)
	}
	if err != nil {
		return fmt.Errorf("service %q: %w", c.flags.name, err)
	}
	defer s.Close()
	return do(s)
}

func (c *serviceCommand) install() error {
	if err := checkServePaths(c.flags.serveArgs); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding gpuwatch.exe's path: %w", err)
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return fmt.Errorf("finding gpuwatch.exe's path: %w", err)
	}
	m, err := connect()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	if s, err := m.OpenService(c.flags.name); err == nil {
		s.Close()
		return fmt.Errorf("service %q exists already: gpuwatch service uninstall removes it; --service.name installs another", c.flags.name)
	}
	argv := serviceArgv(c.flags.name, c.flags.serveArgs)
	s, err := m.CreateService(c.flags.name, exe, mgr.Config{
		DisplayName:      "gpuwatch (" + c.flags.name + ")",
		Description:      "Prometheus exporter for NVIDIA GPUs: gpuwatch serve, logging to the Application event log.",
		StartType:        mgr.StartAutomatic,
		ServiceStartName: serviceAccounts[c.flags.account],
	}, argv...)
	if err != nil {
		return fmt.Errorf("installing service %q: %w", c.flags.name, err)
	}
	defer s.Close()
	// The service is usable without these; say what is missing and how
	// to add it by hand.
	if err := s.SetRecoveryActions(serviceRecovery, serviceRecoveryReset); err != nil {
		fmt.Fprintf(os.Stderr, "gpuwatch: warning: recovery actions not set (%v); set them with sc.exe failure %s reset= 86400 actions= restart/5000/restart/30000/restart/120000\n", err, c.flags.name)
	} else if err := s.SetRecoveryActionsOnNonCrashFailures(true); err != nil {
		fmt.Fprintf(os.Stderr, "gpuwatch: warning: recovery on an error exit not set (%v); set it with sc.exe failureflag %s 1\n", err, c.flags.name)
	}
	if err := eventlog.InstallAsEventCreate(c.flags.name, eventlog.Error|eventlog.Warning|eventlog.Info); err != nil && !strings.Contains(err.Error(), "exists") {
		fmt.Fprintf(os.Stderr, "gpuwatch: warning: event log source %q not registered (%v); the events show without their text formatting\n", c.flags.name, err)
	}
	fmt.Printf("installed service %s (account %s, starts at boot): %s %s\nstart it with: gpuwatch service start", c.flags.name,
		serviceAccounts[c.flags.account], windows.EscapeArg(exe), strings.Join(escapeArgs(argv), " "))
	if c.flags.name != defaultServiceName {
		fmt.Printf(" --service.name=%s", windows.EscapeArg(c.flags.name))
	}
	fmt.Println()
	return nil
}

func escapeArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = windows.EscapeArg(a)
	}
	return out
}

func (c *serviceCommand) uninstall() error {
	return c.withService(func(s *mgr.Service) error {
		if st, err := s.Query(); err == nil && st.State != svc.Stopped {
			if err := stopAndWait(s); err != nil {
				return err
			}
		}
		if err := s.Delete(); err != nil {
			return fmt.Errorf("removing service %q: %w", c.flags.name, err)
		}
		if err := eventlog.Remove(c.flags.name); err != nil {
			fmt.Fprintf(os.Stderr, "gpuwatch: warning: event log source %q not removed: %v\n", c.flags.name, err)
		}
		fmt.Printf("removed service %s\n", c.flags.name)
		return nil
	})
}

func (c *serviceCommand) start() error {
	return c.withService(func(s *mgr.Service) error {
		if err := s.Start(); errors.Is(err, windows.ERROR_SERVICE_ALREADY_RUNNING) {
			fmt.Printf("service %s is running already\n", c.flags.name)
			return nil
		} else if err != nil {
			return fmt.Errorf("starting service %q: %w", c.flags.name, err)
		}
		st, err := waitState(s, func(st svc.State) bool { return st == svc.Running || st == svc.Stopped })
		if err == nil && st.State == svc.Running {
			// The service says Running as soon as serve starts; a flag
			// value or a taken port ends it moments later.
			time.Sleep(serviceSettle)
			st, err = s.Query()
		}
		if err != nil {
			return fmt.Errorf("service %q: %w", c.flags.name, err)
		}
		if st.State != svc.Running {
			return fmt.Errorf("service %q stopped right after its start (%s); the Application event log says why "+
				"(Get-EventLog -LogName Application -Source %s -Newest 10)", c.flags.name, exitDescription(st), c.flags.name)
		}
		fmt.Printf("service %s is running\n", c.flags.name)
		return nil
	})
}

func (c *serviceCommand) stop() error {
	return c.withService(func(s *mgr.Service) error {
		if err := stopAndWait(s); err != nil {
			return err
		}
		fmt.Printf("service %s stopped\n", c.flags.name)
		return nil
	})
}

// stopAndWait asks the service to stop and waits until it has.
func stopAndWait(s *mgr.Service) error {
	if _, err := s.Control(svc.Stop); err != nil && !errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
		return fmt.Errorf("stopping service %q: %w", s.Name, err)
	}
	_, err := waitState(s, func(st svc.State) bool { return st == svc.Stopped })
	return err
}

// waitState polls the service until done accepts its state.
func waitState(s *mgr.Service, done func(svc.State) bool) (svc.Status, error) {
	deadline := time.Now().Add(serviceWait)
	for {
		st, err := s.Query()
		if err != nil {
			return st, fmt.Errorf("service %q: %w", s.Name, err)
		}
		if done(st.State) {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("service %q still %s after %s", s.Name, stateName(st.State), serviceWait)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *serviceCommand) status() error {
	return c.withService(func(s *mgr.Service) error {
		st, err := s.Query()
		if err != nil {
			return fmt.Errorf("service %q: %w", c.flags.name, err)
		}
		cfg, err := queryConfig(s)
		if err != nil {
			return fmt.Errorf("service %q: %w", c.flags.name, err)
		}
		fmt.Printf("service:  %s\nstate:    %s", c.flags.name, stateName(st.State))
		if st.State == svc.Stopped {
			fmt.Printf(" (%s)", exitDescription(st))
		}
		fmt.Printf("\naccount:  %s\nstart:    %s\ncommand:  %s\n", windows.UTF16PtrToString(cfg.ServiceStartName),
			startTypeName(cfg.StartType), windows.UTF16PtrToString(cfg.BinaryPathName))
		if actions, err := s.RecoveryActions(); err != nil {
			fmt.Printf("recovery: not readable (%v)\n", err)
		} else {
			var parts []string
			for _, a := range actions {
				if a.Type == mgr.ServiceRestart {
					parts = append(parts, "restart after "+a.Delay.String())
				}
			}
			if len(parts) == 0 {
				parts = []string{"none"}
			}
			fmt.Printf("recovery: %s\n", strings.Join(parts, ", "))
		}
		return nil
	})
}

// queryConfig reads the service's configuration with QueryServiceConfig
// alone: mgr's Config also asks QueryServiceConfig2 for optional levels,
// which some service managers (Wine's) refuse.
func queryConfig(s *mgr.Service) (*windows.QUERY_SERVICE_CONFIG, error) {
	var need uint32
	buf := make([]byte, 1024)
	for {
		cfg := (*windows.QUERY_SERVICE_CONFIG)(unsafe.Pointer(&buf[0]))
		err := windows.QueryServiceConfig(s.Handle, cfg, uint32(len(buf)), &need)
		if errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER) && int(need) > len(buf) {
			buf = make([]byte, need)
			continue
		}
		return cfg, err
	}
}

func stateName(s svc.State) string {
	switch s {
	case svc.Stopped:
		return "stopped"
	case svc.StartPending:
		return "starting"
	case svc.StopPending:
		return "stopping"
	case svc.Running:
		return "running"
	}
	return fmt.Sprintf("state %d", s)
}

func startTypeName(t uint32) string {
	switch t {
	case mgr.StartAutomatic:
		return "automatic (at boot)"
	case mgr.StartManual:
		return "manual"
	case mgr.StartDisabled:
		return "disabled"
	}
	return fmt.Sprintf("type %d", t)
}

// exitDescription says how a stopped service ended.
func exitDescription(st svc.Status) string {
	switch {
	case st.Win32ExitCode == uint32(windows.ERROR_SERVICE_SPECIFIC_ERROR):
		return fmt.Sprintf("gpuwatch's exit code %d", st.ServiceSpecificExitCode)
	case st.Win32ExitCode != 0:
		return fmt.Sprintf("exit: %v", windows.Errno(st.Win32ExitCode))
	}
	return "exit code 0"
}

// runService is the process the service manager starts: serve, under
// serviceLoop, logging to the event log.
func (c *serviceCommand) runService() error {
	elog, err := eventlog.Open(c.flags.name)
	if err != nil {
		return fmt.Errorf("opening the event log source %q: %w", c.flags.name, err)
	}
	defer elog.Close()
	c.serve.common.log.Writer = eventLogWriter{elog}
	logger := promslog.New(c.serve.common.log)
	h := serviceHandler{serve: c.serve, logger: logger}
	if err := svc.Run(c.flags.name, h); err != nil {
		return fmt.Errorf("gpuwatch service run is what the Windows service manager starts (gpuwatch service start); "+
			"in a console, run gpuwatch serve: %w", err)
	}
	return nil
}

// serviceHandler is svc's Handler over serviceLoop.
type serviceHandler struct {
	serve  *serveCommand
	logger *slog.Logger
}

func (h serviceHandler) Execute(_ []string, r <-chan svc.ChangeRequest, s chan<- svc.Status) (bool, uint32) {
	requests := make(chan serviceRequest)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case req := <-r:
				select {
				case requests <- requestOf(req.Cmd):
				case <-done:
					return
				}
			case <-done:
				return
			}
		}
	}()
	report := func(st serviceStatus) { s <- statusOf(st) }
	code := serviceLoop(requests, report, h.serve.serve, shutdownDrain(h.serve.common.timeout), h.logger)
	close(done)
	return code != serviceExitOK, code
}

func requestOf(cmd svc.Cmd) serviceRequest {
	switch cmd {
	case svc.Interrogate:
		return serviceInterrogate
	case svc.Stop, svc.Shutdown:
		return serviceStop
	}
	return serviceOther
}

func statusOf(st serviceStatus) svc.Status {
	out := svc.Status{WaitHint: uint32(st.waitHint.Milliseconds())}
	switch st.state {
	case serviceStartPending:
		out.State = svc.StartPending
	case serviceRunning:
		out.State = svc.Running
	case serviceStopPending:
		out.State = svc.StopPending
	}
	if st.acceptsStop {
		out.Accepts = svc.AcceptStop | svc.AcceptShutdown
	}
	return out
}

// eventLogWriter files each log line (slog writes a record in one Write)
// in the event log at the line's level.
type eventLogWriter struct{ log *eventlog.Log }

// eventID is the one event ID gpuwatch writes: EventCreate.exe, the
// source's message file, formats IDs 1 to 1000 as their text.
const eventID = 1

func (w eventLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\r\n")
	var err error
	switch level := logLineLevel(p); {
	case level >= slog.LevelError:
		err = w.log.Error(eventID, msg)
	case level >= slog.LevelWarn:
		err = w.log.Warning(eventID, msg)
	default:
		err = w.log.Info(eventID, msg)
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}
