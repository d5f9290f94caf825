package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"gopkg.in/yaml.v3"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/internal/health"
	"github.com/gpuwatch/gpuwatch/internal/httpclient"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// maxHealthAnswer bounds the serve's /api/v1/health document: a few
// hundred bytes per GPU.
const maxHealthAnswer = 4 << 20

// maxKernelLogBytes bounds what is read of the kernel log: the kernel's
// ring buffer is at most a few MiB.
const maxKernelLogBytes = 32 << 20

// kernelLogCommandTimeout bounds --health.kernel-log-command: journalctl
// reads the kernel messages of one boot in well under a second.
const kernelLogCommandTimeout = 5 * time.Second

// fromServe asks the running serve for its verdicts, within the serve
// timeout. The error says why no report came (nothing listening, a
// timeout, a refusal), in words fit for a warning.
func (c *healthCommand) fromServe() (health.Report, error) {
	base, err := c.serveBase()
	if err != nil {
		return health.Report{}, err
	}
	timeout := c.serveTimeout
	if timeout == 0 {
		timeout = c.common.collectionBudget()
	}
	client, err := httpclient.New(httpclient.Options{
		HTTPConfigFile: c.httpConfig, Name: "gpuwatch-health", Timeout: timeout, MaxResponseBytes: maxHealthAnswer,
	})
	if err != nil {
		return health.Report{}, fmt.Errorf("--health.http-config: %w", err)
	}
	url := strings.TrimSuffix(base, "/") + "/api/v1/health"
	shown := httpclient.RedactURL(url)
	resp, err := client.Get(url)
	if err != nil {
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() {
			return health.Report{}, fmt.Errorf("the serve at %s did not answer within %s", shown, timeout)
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return health.Report{}, fmt.Errorf("no serve answers at %s (connection refused)", shown)
		}
		return health.Report{}, fmt.Errorf("the serve at %s: %s", shown, redactedCause(err, url, shown))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return health.Report{}, fmt.Errorf("the serve at %s: reading its answer: %s", shown, redactedCause(err, url, shown))
	}
	if resp.StatusCode != http.StatusOK {
		return health.Report{}, fmt.Errorf("the serve at %s answered %s: %s", shown, resp.Status, firstLine(body))
	}
	var report health.Report
	if err := json.Unmarshal(body, &report); err != nil {
		return health.Report{}, fmt.Errorf("the serve at %s: its answer is not a health report: %v", shown, err)
	}
	if snapshot.HealthRank(report.Status) < 0 || report.GPUs == nil {
		return health.Report{}, fmt.Errorf("the serve at %s: its answer is not a health report (status %q)", shown, report.Status)
	}
	report.Source, report.From = health.SourceServe, shown
	return report, nil
}

// serveBase is --health.serve-url, or the URL of the serve that the web
// flags describe on this host.
func (c *healthCommand) serveBase() (string, error) {
	if c.serveURL != "" {
		return c.serveURL, nil
	}
	return listenURL(c.web)
}

// listenURL is the URL, on this host, of the serve that the web flags
// describe (its first --web.listen-address).
func listenURL(w *web.FlagConfig) (string, error) {
	addrs := *w.WebListenAddresses
	if len(addrs) == 0 || (w.WebSystemdSocket != nil && *w.WebSystemdSocket) {
		return "", errors.New("no serve address: give --health.serve-url")
	}
	host, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		return "", fmt.Errorf("--web.listen-address=%s: %v", addrs[0], err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	scheme := "http"
	if *w.WebConfigFile != "" {
		tls, err := webConfigHasTLS(*w.WebConfigFile)
		if err != nil {
			return "", fmt.Errorf("--web.config.file: %w", err)
		}
		if tls {
			scheme = "https"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// webConfigHasTLS says whether an exporter-toolkit web config serves TLS.
func webConfigHasTLS(path string) (bool, error) {
	data, err := configfile.Read(path)
	if err != nil {
		return false, err
	}
	var cfg struct {
		TLS *struct {
			CertFile string `yaml:"cert_file"`
			Cert     string `yaml:"cert"`
		} `yaml:"tls_server_config"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return false, fmt.Errorf("%s: %s", path, configfile.YAMLError(err, nil))
	}
	return cfg.TLS != nil && (cfg.TLS.CertFile != "" || cfg.TLS.Cert != ""), nil
}

// redactedCause is err's text with url shown redacted.
func redactedCause(err error, url, shown string) string {
	msg := strings.ReplaceAll(err.Error(), url, shown)
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg[:i], shown) {
		return msg[i+2:]
	}
	return msg
}

// firstLine is the first line of an answer's body, bounded, for an error.
func firstLine(body []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(body), []byte("\n"))
	if len(line) > 200 {
		line = append(line[:200:200], "…"...)
	}
	return strconv.QuoteToGraphic(string(line))
}

// readKernelLog reads the kernel log the flags name and parses its XIDs.
// what names the log read ("" when none was); a log that cannot be read
// is a warning.
func (c *healthCommand) readKernelLog() (what string, xids []health.KernelXID, warnings []string) {
	var data []byte
	var err error
	switch {
	case len(c.kernelCmd) > 0:
		what = "the kernel log from " + strings.Join(c.kernelCmd, " ")
		data, err = runKernelLogCommand(c.kernelCmd)
	case c.kernelLog != "":
		what = "the kernel log " + c.kernelLog
		data, err = readKernelLogFile(c.kernelLog, maxKernelLogBytes)
	default:
		return "", nil, nil
	}
	if err != nil {
		return "", nil, []string{fmt.Sprintf("%s: not read, so XIDs from before this run are not counted: %v", strings.TrimPrefix(what, "the "), err)}
	}
	xids, warnings = health.ParseKernelLog(bytes.NewReader(data), bootTime())
	return what, xids, warnings
}

func runKernelLogCommand(argv []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kernelLogCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout = &capWriter{w: &out, left: maxKernelLogBytes}
	var stderr bytes.Buffer
	cmd.Stderr = &capWriter{w: &stderr, left: 4096}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("did not finish within %s", kernelLogCommandTimeout)
		}
		return nil, fmt.Errorf("%v: %s", err, firstLine(stderr.Bytes()))
	}
	return out.Bytes(), nil
}

// capWriter keeps at most left bytes and drops the rest.
type capWriter struct {
	w    io.Writer
	left int
}

func (c *capWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > c.left {
		p = p[:c.left]
	}
	c.left -= len(p)
	if _, err := c.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

// bootTime is when this machine booted, after /proc/uptime; zero when it
// cannot be read (then since-boot times are not read).
func bootTime() time.Time {
	data, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return time.Time{}
	}
	first, _, _ := strings.Cut(string(data), " ")
	up, err := strconv.ParseFloat(first, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Now().Add(-time.Duration(up * float64(time.Second)))
}
