//go:build linux

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// writeSelfSignedCert writes a certificate for 127.0.0.1 and its key, and
// returns a pool that trusts it.
func writeSelfSignedCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	return certFile, keyFile, testenv.SelfSignedCert(t, certFile, keyFile)
}

// TestTLSAndBasicAuth serves through an exporter-toolkit web config file
// with TLS and a bcrypt basic-auth user.
func TestTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := writeSelfSignedCert(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web.yml")
	writeFile(t, webConfig, fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prometheus: %s\n", certFile, keyFile, hash))

	port := testenv.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	proc := testenv.StartProcess(t, nil, gpuwatchBin, "--backend=sim", "--sim.profile=h100", "--web.listen-address="+addr, "--web.config.file="+webConfig)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	do := func(user, pass, scheme string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/metrics", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	testenv.WaitFor(t, 15*time.Second, "gpuwatch to serve TLS", func() bool {
		if proc.Exited() {
			t.Fatalf("gpuwatch exited:\n%s", proc.Output.String())
		}
		_, _, err := do("", "", "https")
		return err == nil
	})
	if code, _, _ := do("", "", "https"); code != http.StatusUnauthorized {
		t.Errorf("no credentials: status %d, want 401", code)
	}
	if code, _, _ := do("prometheus", "wrong", "https"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: status %d, want 401", code)
	}
	code, body, err := do("prometheus", "s3cret", "https")
	if err != nil || code != 200 || !strings.Contains(body, "gpu_up{") {
		t.Errorf("right password: status %d err %v", code, err)
	}
	// Plain HTTP on a TLS listener must not leak metrics.
	if code, body, err := do("prometheus", "s3cret", "http"); err == nil && strings.Contains(body, "gpu_up{") {
		t.Errorf("plain HTTP served metrics (status %d)", code)
	}
}

func TestInvalidWebConfigFailsAtStart(t *testing.T) {
	webConfig := filepath.Join(t.TempDir(), "web.yml")
	writeFile(t, webConfig, "tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent.key\n")
	out, code := runGpuwatch(t, "--backend=sim", "--sim.profile=h100", "--web.listen-address=127.0.0.1:0", "--web.config.file="+webConfig)
	if code == 0 || !strings.Contains(out, "nonexistent") {
		t.Fatalf("exit %d, output %q", code, out)
	}
}
