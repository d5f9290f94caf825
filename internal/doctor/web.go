package doctor

import (
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"
	"gopkg.in/yaml.v3"
)

// checkWebConfig: --web.config.file is valid, and what it protects. The
// exporter toolkit applies TLS and basic auth to every path alike.
func checkWebConfig(env Env) []Result {
	if env.WebConfigFile == "" {
		return []Result{skip("web config", "none: every endpoint (/metrics, /healthz, /readyz, /) is plain HTTP without auth; use --web.config.file for TLS and basic auth")}
	}
	if err := web.Validate(env.WebConfigFile); err != nil {
		return []Result{fail("web config", fmt.Sprintf("%s: %v", env.WebConfigFile, err), "fix the file (exporter-toolkit's web configuration format)", true)}
	}
	data, err := os.ReadFile(env.WebConfigFile)
	if err != nil {
		return []Result{fail("web config", err.Error(), "make the file readable by gpuwatch's user", true)}
	}
	var cfg struct {
		TLS       map[string]any    `yaml:"tls_server_config"`
		BasicAuth map[string]string `yaml:"basic_auth_users"`
	}
	_ = yaml.Unmarshal(data, &cfg)
	var how []string
	if len(cfg.TLS) > 0 {
		tls := "TLS"
		if _, mtls := cfg.TLS["client_ca_file"]; mtls {
			tls = "TLS with client certificates"
		}
		how = append(how, tls)
	}
	if len(cfg.BasicAuth) > 0 {
		how = append(how, fmt.Sprintf("basic auth (%d users)", len(cfg.BasicAuth)))
	}
	if len(how) == 0 {
		return []Result{ok("web config", env.WebConfigFile+" is valid and protects nothing: every endpoint is plain HTTP without auth")}
	}
	return []Result{ok("web config", fmt.Sprintf("%s is valid: %s on every endpoint (/metrics, /healthz, /readyz, /)", env.WebConfigFile, strings.Join(how, " and ")))}
}
