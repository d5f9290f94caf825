// Command fakesmi is the project's stand-in for nvidia-smi in tests: it
// answers --help-query-gpu, --query-gpu and --query-compute-apps from the
// fixture files of internal/backend/smibackend/testdata (see smifixture), and can
// be slow, hang, fail or print garbage. It is configured by environment
// variables, since the reader under test passes nvidia-smi's own arguments:
//
//	FAKESMI_HELP       the --help-query-gpu text (a help-query-gpu-*.txt)
//	FAKESMI_GPUS       the GPUs (a gpu-*.csv)
//	FAKESMI_APPS       their processes (an apps-*.csv); none when unset.
//	                   ${FAKESMI_...} in it is replaced by the variable.
//	FAKESMI_MODE       ok (default), slow (answer after FAKESMI_DELAY,
//	                   default 2s), hang, fail (nvidia-smi's message when
//	                   the driver is not loaded, exit 9) or garbage
//	FAKESMI_MODE_FILE  a file whose content, when it exists, overrides
//	                   FAKESMI_MODE (a test changes it while gpuwatch runs)
//	FAKESMI_LOG        a file each run appends its PID and arguments to
//
// Built for Windows it ends its lines in CRLF, as Windows programs do.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/backend/smibackend/smifixture"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	logRun(args)
	switch mode() {
	case "hang":
		time.Sleep(time.Hour)
	case "slow":
		delay, err := time.ParseDuration(os.Getenv("FAKESMI_DELAY"))
		if err != nil {
			delay = 2 * time.Second
		}
		time.Sleep(delay)
	case "fail":
		fmt.Fprintln(os.Stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.")
		return 9
	case "garbage":
		write([]byte("\x00\x01 <html>502 Bad Gateway</html>\n4, 2, 4, 2\n"))
		return 0
	}
	if len(args) == 0 {
		return fail(2, "fakesmi answers only --help-query-gpu, --query-gpu=... and --query-compute-apps=...")
	}
	query, fields, _ := strings.Cut(args[0], "=")
	switch query {
	case "--help-query-gpu":
		return answer(read("FAKESMI_HELP"))
	case "--query-gpu":
		out, err := smifixture.Answer(read("FAKESMI_HELP"), read("FAKESMI_GPUS"), strings.Split(fields, ","))
		if invalid, ok := errors.AsType[smifixture.ErrInvalidField](err); ok {
			return fail(2, invalid.Error()+"\nRun 'nvidia-smi --help-query-gpu' for more information.")
		}
		return answer(out)
	case "--query-compute-apps":
		if os.Getenv("FAKESMI_APPS") == "" {
			return answer(nil)
		}
		rows := os.Expand(string(smifixture.Rows(read("FAKESMI_APPS"))), func(name string) string {
			if strings.HasPrefix(name, "FAKESMI_") {
				return os.Getenv(name)
			}
			return "${" + name + "}"
		})
		return answer([]byte(rows))
	}
	return fail(2, "fakesmi: unknown option "+args[0])
}

func mode() string {
	if f := os.Getenv("FAKESMI_MODE_FILE"); f != "" {
		if b, err := os.ReadFile(f); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return os.Getenv("FAKESMI_MODE")
}

func logRun(args []string) {
	path := os.Getenv("FAKESMI_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%d %s\n", os.Getpid(), strings.Join(args, " "))
}

func read(env string) []byte {
	b, err := os.ReadFile(os.Getenv(env))
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakesmi: %s: %v\n", env, err)
		os.Exit(3)
	}
	return b
}

func answer(out []byte) int {
	write(out)
	return 0
}

func write(out []byte) {
	if runtime.GOOS == "windows" {
		out = []byte(strings.ReplaceAll(string(out), "\n", "\r\n"))
	}
	_, _ = os.Stdout.Write(out)
}

func fail(code int, msg string) int {
	fmt.Fprintln(os.Stderr, msg)
	return code
}
