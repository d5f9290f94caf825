package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// The Windows service: `gpuwatch service install|uninstall|start|stop|status`
// and the hidden `service run`, which is what the service manager starts.
// What needs no Windows API lives in this file, so that it is tested on
// every platform: the commands and their flags, the argv that install
// stores, the service's life between the service manager's requests and
// serve, and the event log's levels. The service manager's calls are in
// service_windows.go; elsewhere the commands say what to use instead
// (service_other.go).

// defaultServiceName is the service's name and its event log source.
const defaultServiceName = "gpuwatch"

// serviceOwnFlags are the service commands' own flags: install does not
// store them for serve (run gets --service.name from the stored argv).
var serviceOwnFlags = map[string]bool{"service.name": true, "service.account": true}

// serviceFlags are the flags of the service commands.
type serviceFlags struct {
	name    string
	account string
	// serveArgs are serve's flags as given to install, in the order given.
	serveArgs []string
}

// serviceCommand is one verb of `gpuwatch service`.
type serviceCommand struct {
	verb  string
	flags *serviceFlags
	serve *serveCommand
}

func (c *serviceCommand) name() string { return "service " + c.verb }

func newServiceCommands(app *kingpin.Application, serve *serveCommand) []command {
	f := &serviceFlags{}
	svc := app.Command("service", "Windows only: run serve as a Windows service (install, uninstall, start, stop, status). "+
		"On Linux, run serve under systemd (deploy/systemd/gpuwatch.service; the packages install it).")
	install := svc.Command("install", "Install the service (from an elevated prompt): it runs serve with the shared flags given here "+
		"(gpuwatch service install --web.listen-address=:9410), starts at boot, is restarted after a failure, and logs to the Application event log. "+
		"Paths in flags must be absolute: a service starts in %SystemRoot%\\System32.")
	install.Flag("service.account", "Account the service runs as: LocalService (least privilege: owners of other accounts' GPU processes stay absent), "+
		"NetworkService (the same, with the machine's identity on the network), or LocalSystem (full control of the machine; needed for every process's owner).").
		Default("LocalService").EnumVar(&f.account, "LocalService", "NetworkService", "LocalSystem")
	install.Action(func(ctx *kingpin.ParseContext) error {
		f.serveArgs = serveArgsOf(ctx)
		return nil
	})
	verbs := []*kingpin.CmdClause{install,
		svc.Command("uninstall", "Stop the service if it runs, remove it and its event log source."),
		svc.Command("start", "Start the service and wait until it runs (or say why it stopped)."),
		svc.Command("stop", "Stop the service (the same graceful shutdown as SIGTERM on Linux) and wait until it has stopped."),
		svc.Command("status", "Print the service's state, account, start type, recovery actions and command line."),
		svc.Command("run", "What the Windows service manager starts: serve, with its log in the event log.").Hidden(),
	}
	var cmds []command
	for _, v := range verbs {
		v.Flag("service.name", "Name of the Windows service, and of its event log source; another name installs a second service (for example watching a remote host).").
			Default(defaultServiceName).StringVar(&f.name)
		cmds = append(cmds, &serviceCommand{verb: v.Model().Name, flags: f, serve: serve})
	}
	return cmds
}

// serveArgsOf rebuilds, from a parse, the shared flags the user gave, one
// argument each, so that parsing them again gives the same values: bool
// flags as --NAME or --no-NAME (kingpin takes no value after a bool flag),
// the others as --NAME=VALUE. Commands, the service commands' own flags and
// kingpin's (help, version) are left out.
func serveArgsOf(ctx *kingpin.ParseContext) []string {
	var args []string
	for _, el := range ctx.Elements {
		fc, ok := el.Clause.(*kingpin.FlagClause)
		if !ok || el.Value == nil {
			continue
		}
		m := fc.Model()
		if serviceOwnFlags[m.Name] || kingpinFlags[m.Name] {
			continue
		}
		switch {
		case !m.IsBoolFlag():
			args = append(args, "--"+m.Name+"="+*el.Value)
		case *el.Value == "true":
			args = append(args, "--"+m.Name)
		default:
			args = append(args, "--no-"+m.Name)
		}
	}
	return args
}

// serviceArgv is the argument list install stores for the service manager
// to start the executable with: the hidden run command, the service's
// name, and serve's flags. The service manager quotes each argument by
// Windows' rules (no shell reads it).
func serviceArgv(name string, serveArgs []string) []string {
	return append([]string{"service", "run", "--service.name=" + name}, serveArgs...)
}

// checkServiceName refuses a name the service manager would refuse, before
// anything is installed.
func checkServiceName(name string) error {
	switch {
	case name == "":
		return errors.New("--service.name: empty")
	case len(name) > 256:
		return fmt.Errorf("--service.name=%.20s...: at most 256 characters", name)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("--service.name=%s: a service name cannot hold / or \\", name)
	}
	return nil
}

// checkServePaths refuses flag values that name an existing file or folder
// by a relative path: the service starts in %SystemRoot%\System32, where the
// path would name something else, or nothing.
func checkServePaths(serveArgs []string) error {
	for _, a := range serveArgs {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || value == "" || filepath.IsAbs(value) {
			continue
		}
		if _, err := os.Stat(value); err == nil {
			abs, _ := filepath.Abs(value)
			return fmt.Errorf("--%s=%s: a relative path, and the service starts in %%SystemRoot%%\\System32; give the absolute path (%s)", name, value, abs)
		}
	}
	return nil
}

// serviceState is the part of a service's state the loop reports; the
// Windows glue maps each to svc's State.
type serviceState int

const (
	serviceStartPending serviceState = iota + 1
	serviceRunning
	serviceStopPending
)

// serviceRequest is what the service manager asks; the Windows glue maps
// svc's Cmd values to these.
type serviceRequest int

const (
	serviceInterrogate serviceRequest = iota + 1
	// serviceStop is Stop or Shutdown: both end serve the same way.
	serviceStop
	// serviceOther is a request the service does not accept (it says so
	// when it reports Running).
	serviceOther
)

// serviceStatus is one report to the service manager.
type serviceStatus struct {
	state serviceState
	// acceptsStop: the service manager may send Stop and Shutdown.
	acceptsStop bool
	// waitHint is how long the pending state may last before the service
	// manager thinks the service hung.
	waitHint time.Duration
}

// Exit codes the service reports to the service manager when it stops
// (service-specific: Windows shows them as such).
const (
	serviceExitOK = 0
	// serviceExitFailed: serve ended by itself, or failed while stopping;
	// the recovery actions install sets restart the service on it.
	serviceExitFailed = 1
)

// serviceLoop is the service's life. It starts serve, reports Running, and
// on Stop or Shutdown cancels serve's context, which is what SIGTERM does
// on Linux (scrapes in progress get drain to finish), reports StopPending
// meanwhile and returns once serve has returned. Serve ending by itself
// (it cannot listen, say) is a failure. The service manager learns of
// Stopped, with the returned exit code, when the caller returns it.
func serviceLoop(requests <-chan serviceRequest, report func(serviceStatus), serve func(context.Context) error,
	drain time.Duration, logger *slog.Logger) uint32 {
	report(serviceStatus{state: serviceStartPending, waitHint: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	running := serviceStatus{state: serviceRunning, acceptsStop: true}
	report(running)
	for {
		select {
		case req := <-requests:
			switch req {
			case serviceInterrogate:
				report(running)
			case serviceStop:
				logger.Info("the Windows service manager asked gpuwatch to stop")
				cancel()
				return serviceStopping(requests, report, done, drain, logger)
			}
		case err := <-done:
			if err == nil {
				err = errors.New("it returned without being asked to stop")
			}
			logger.Error("serve ended; the service stops with an error", "err", err)
			return serviceExitFailed
		}
	}
}

// serviceStopping waits for serve to return after its context was
// cancelled, answering the service manager meanwhile.
func serviceStopping(requests <-chan serviceRequest, report func(serviceStatus), done <-chan error,
	drain time.Duration, logger *slog.Logger) uint32 {
	// Past the drain, serve closes its stack (the collection in flight
	// ends within the same timeout).
	stopping := serviceStatus{state: serviceStopPending, waitHint: 2*drain + 5*time.Second}
	report(stopping)
	for {
		select {
		case <-requests:
			report(stopping)
		case err := <-done:
			if err != nil {
				logger.Error("serve failed while stopping", "err", err)
				return serviceExitFailed
			}
			return serviceExitOK
		}
	}
}

// logLineLevel is the level of one line that promslog wrote (logfmt's
// level=X or JSON's "level":"X", in either case), so that the event log files it as an
// error, a warning or information. A line without one is information.
func logLineLevel(line []byte) slog.Level {
	s := string(line)
	// The level key comes before the message: the first one is it.
	rest, at := "", len(s)
	for _, key := range []string{"level=", `"level":"`} {
		if i := strings.Index(s, key); i >= 0 && i < at {
			rest, at = s[i+len(key):], i
		}
	}
	// promslog's go-kit style writes the level in lower case.
	rest = strings.ToUpper(rest[:min(len(rest), len("ERROR"))])
	switch {
	case strings.HasPrefix(rest, "ERROR"):
		return slog.LevelError
	case strings.HasPrefix(rest, "WARN"):
		return slog.LevelWarn
	case strings.HasPrefix(rest, "DEBUG"):
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
