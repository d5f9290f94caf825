//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestLivePageNeedsCredentials: the web config's basic auth covers the
// live page, its assets and every API path, not only /metrics.
func TestLivePageNeedsCredentials(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(t.TempDir(), "web.yml")
	writeFile(t, webConfig, fmt.Sprintf("basic_auth_users:\n  viewer: %s\n", hash))
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	proc := testenv.StartProcess(t, nil, gpuwatchBin, "--backend=sim", "--sim.profile=h100", "--web.listen-address="+addr, "--web.config.file="+webConfig, "--ui.interval=1s")
	base := "http://" + addr

	status := func(path, user, pass string) int {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testenv.WaitFor(t, 15*time.Second, "gpuwatch to answer with credentials", func() bool {
		if proc.Exited() {
			t.Fatalf("gpuwatch exited:\n%s", proc.Output.String())
		}
		return status("/api/v1/snapshot", "viewer", "s3cret") == http.StatusOK
	})
	for _, path := range []string{"/", "/assets/app.js", "/api/v1/snapshot", "/api/v1/processes", "/api/v1/history"} {
		if got := status(path, "", ""); got != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", path, got)
		}
		if got := status(path, "viewer", "wrong"); got != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong password: %d, want 401", path, got)
		}
		if got := status(path, "viewer", "s3cret"); got != http.StatusOK {
			t.Errorf("GET %s with credentials: %d, want 200", path, got)
		}
	}
}
