package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/backend/smibackend"
)

// smiFlags configure --backend=nvidia-smi.
type smiFlags struct {
	command string
	host    string
}

func (s *smiFlags) register(app *kingpin.Application) {
	app.Flag("nvidia-smi.command", `With --backend=nvidia-smi: the command to run instead of nvidia-smi, as a JSON list of arguments (no shell: nothing is split, expanded or quoted), the query's arguments appended; e.g. '["ssh","-o","BatchMode=yes","-o","ConnectTimeout=3","gpuwatch@gpu-box","nvidia-smi"]' to watch a remote host (see docs/nvidia-smi.md). Default: nvidia-smi on the PATH.`).
		PlaceHolder(`'["ARG",...]'`).StringVar(&s.command)
	app.Flag("nvidia-smi.host", "With --backend=nvidia-smi: the host whose nvidia-smi --nvidia-smi.command runs, when it is not this one. It names the host in gpuwatch_driver_info{library} and in the --compat=dcgm Hostname label, and turns off owner lookups (this host's processes are not the remote GPUs' processes). Required with an ssh command.").
		PlaceHolder("NAME").StringVar(&s.host)
}

// argv parses --nvidia-smi.command; nil when it is not set.
func (s *smiFlags) argv() ([]string, error) {
	if strings.TrimSpace(s.command) == "" {
		return nil, nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(s.command), &argv); err != nil {
		return nil, fmt.Errorf(`--nvidia-smi.command=%s: not a JSON list of arguments, such as '["ssh","gpu-box","nvidia-smi"]': %v`, s.command, err)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("--nvidia-smi.command=%s: the list is empty or its command is empty", s.command)
	}
	return argv, nil
}

// check refuses flags that do not fit together.
func (s *smiFlags) check(backend string) error {
	if backend != "nvidia-smi" {
		if s.command != "" || s.host != "" {
			return fmt.Errorf("--nvidia-smi.command and --nvidia-smi.host need --backend=nvidia-smi (the backend is %s)", backend)
		}
		return nil
	}
	argv, err := s.argv()
	if err != nil {
		return err
	}
	if len(argv) > 0 && s.host == "" && strings.TrimSuffix(filepath.Base(argv[0]), ".exe") == "ssh" {
		return fmt.Errorf("--nvidia-smi.command runs ssh: name the remote host with --nvidia-smi.host, so that its GPUs are labelled with it and this host's processes are not taken for theirs")
	}
	return nil
}

// remote says the GPUs read are another host's.
func (s *smiFlags) remote() bool { return s.host != "" }

// smiReader opens the nvidia-smi backend.
func (f *commonFlags) smiReader(logger *slog.Logger) (*smibackend.Reader, error) {
	argv, err := f.smi.argv()
	if err != nil {
		return nil, err
	}
	return smibackend.New(smibackend.Options{Command: argv, Host: f.smi.host, Groups: f.enabledCollectors(), Logger: logger})
}
