package deploycheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"
)

// ComposeDir is the compose stack's directory under the repository root.
const ComposeDir = "deploy/compose"

// LoadCompose loads deploy/compose/compose.yaml with compose-go, the
// loader Docker Compose itself uses: schema validation, interpolation of
// ${VARS} from the process environment and the .env file, and the profiles
// COMPOSE_PROFILES selects, exactly as `docker compose up` would. extraEnv
// ("NAME=value") wins over both, as a variable set in the shell does.
func LoadCompose(root string, extraEnv ...string) (*types.Project, error) {
	dir := filepath.Join(root, ComposeDir)
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")},
		cli.WithWorkingDirectory(dir),
		cli.WithOsEnv,
		cli.WithEnvFiles(),
		cli.WithDotEnv,
		cli.WithEnv(extraEnv),
		cli.WithDefaultProfiles(),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

// HostPath returns the host path a service mounts at target (a bind mount
// whose target is target or a directory above it).
func HostPath(s types.ServiceConfig, target string) (string, error) {
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		if target == v.Target {
			return v.Source, nil
		}
		if rel, ok := strings.CutPrefix(target, strings.TrimSuffix(v.Target, "/")+"/"); ok {
			return filepath.Join(v.Source, rel), nil
		}
	}
	return "", fmt.Errorf("service %s mounts nothing at %s", s.Name, target)
}

// FileSDGroup is one target group of a file_sd list.
type FileSDGroup struct {
	Targets []string          `yaml:"targets" json:"targets"`
	Labels  map[string]string `yaml:"labels" json:"labels"`
}

// LoadFileSD reads a file_sd target list strictly.
func LoadFileSD(path string) ([]FileSDGroup, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var groups []FileSDGroup
	if err := dec.Decode(&groups); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return groups, nil
}

// PrometheusConfig is the compose stack's prometheus.yml as a generic YAML
// tree, for a test to rewrite its paths and intervals and run it.
type PrometheusConfig map[string]any

// LoadPrometheusConfig reads a Prometheus configuration file.
func LoadPrometheusConfig(path string) (PrometheusConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// A plain map, so that nested mappings decode as map[string]any too.
	var c map[string]any
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return c, nil
}

// Rewrite maps every rule file pattern and file_sd file pattern through
// mapPath, and sets the global scrape and evaluation intervals when given.
func (c PrometheusConfig) Rewrite(mapPath func(string) (string, error), interval string) error {
	if rf, ok := c["rule_files"].([]any); ok {
		for i, p := range rf {
			mapped, err := mapPath(fmt.Sprint(p))
			if err != nil {
				return err
			}
			rf[i] = mapped
		}
	}
	scrapes, _ := c["scrape_configs"].([]any)
	for _, sc := range scrapes {
		sc, _ := sc.(map[string]any)
		sds, _ := sc["file_sd_configs"].([]any)
		for _, sd := range sds {
			sd, _ := sd.(map[string]any)
			files, _ := sd["files"].([]any)
			for i, p := range files {
				mapped, err := mapPath(fmt.Sprint(p))
				if err != nil {
					return err
				}
				files[i] = mapped
			}
		}
	}
	if interval != "" {
		g, _ := c["global"].(map[string]any)
		if g == nil {
			g = map[string]any{}
			c["global"] = g
		}
		g["scrape_interval"], g["evaluation_interval"], g["scrape_timeout"] = interval, interval, interval
	}
	return nil
}

// Write saves the configuration.
func (c PrometheusConfig) Write(path string) error {
	data, err := yaml.Marshal(map[string]any(c))
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
