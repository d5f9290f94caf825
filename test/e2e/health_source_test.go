//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuwatch/gpuwatch/internal/health"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// healthRunBound is how long one `gpuwatch health` may take in these
// tests before it counts as hung: the serve's bound, then a local read.
const healthRunBound = 60 * time.Second

// runHealth runs `gpuwatch health args...` and returns its stdout, its
// stderr and its exit status; a run past healthRunBound fails the test.
func runHealth(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), healthRunBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpuwatchBin, append([]string{"health"}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gpuwatch health %v did not finish within %s", args, healthRunBound)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gpuwatch health: %v", err)
	}
	return out.String(), errOut.String(), code
}

func decodeHealth(t *testing.T, out string) health.Report {
	t.Helper()
	var r health.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("health -o json: %v\n%s", err, out)
	}
	return r
}

// TestHealthCommandAsksTheServe: with a serve running behind TLS and basic
// auth, `gpuwatch health` finds it from the web flags, authenticates with
// --health.http-config and reports the serve's verdicts, the XID 79 that
// serve saw included (the command's own read of the same GPUs has none),
// and says the serve answered. Refused (no credentials), it reads the GPUs
// itself and says why.
func TestHealthCommandAsksTheServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, _ := writeSelfSignedCert(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web.yml")
	writeFile(t, webConfig, fmt.Sprintf("tls_server_config: {cert_file: %q, key_file: %q}\nbasic_auth_users: {health: %q}\n", cert, key, hash))
	client := filepath.Join(dir, "client.yml")
	writeFile(t, client, fmt.Sprintf("basic_auth: {username: health, password: s3cret}\ntls_config: {ca_file: %q}\n", cert))
	simConfig := filepath.Join(dir, "sim.yaml")
	writeFile(t, simConfig, "profile: dgx-h100\nfaults:\n  - {gpu: 2, xid: 79, at: 1s}\n")
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	p := testenv.StartProcess(t, nil, gpuwatchBin, "--web.listen-address="+addr, "--web.config.file="+webConfig, "--backend=sim", "--sim.config="+simConfig, "--no-web.ui")

	// The command's own backend: the same GPUs without the fault, so that
	// only the serve can know of the XID.
	common := []string{"--web.listen-address=" + addr, "--web.config.file=" + webConfig, "--backend=sim", "--sim.profile=dgx-h100", "-o", "json"}
	var r health.Report
	testenv.WaitFor(t, 30*time.Second, "the serve's verdict on GPU 2 through gpuwatch health", func() bool {
		if p.Exited() {
			t.Fatalf("serve exited:\n%s", p.Output.String())
		}
		out, _, code := runHealth(t, append(common, "--health.http-config="+client)...)
		r = decodeHealth(t, out)
		return code == health.ExitUnhealthy && r.Source == health.SourceServe
	})
	if r.From != "https://"+addr+"/api/v1/health" || len(r.GPUs) != 8 || r.GPUs[2].Status != "fail" ||
		!strings.Contains(r.GPUs[2].Reason, "XID 79") || len(r.Warnings) != 0 {
		t.Errorf("report from the serve: %+v", r)
	}
	out, _, code := runHealth(t, "--web.listen-address="+addr, "--web.config.file="+webConfig, "--health.http-config="+client, "--backend=sim", "--sim.profile=dgx-h100")
	if code != health.ExitUnhealthy || !strings.HasPrefix(out, "FAIL: GPU 2 (GPU-") || !strings.Contains(out, "\nsource: serve (https://"+addr+"/api/v1/health)\n") {
		t.Errorf("-o text from the serve: exit %d\n%s", code, out)
	}

	anonymous := filepath.Join(dir, "anonymous.yml")
	writeFile(t, anonymous, fmt.Sprintf("tls_config: {ca_file: %q}\n", cert))
	out, _, code = runHealth(t, append(common, "--health.http-config="+anonymous)...)
	r = decodeHealth(t, out)
	if code != health.ExitHealthy || r.Source != health.SourceLocal || len(r.Warnings) == 0 ||
		!strings.Contains(r.Warnings[0], "the serve at https://"+addr+"/api/v1/health answered 401 Unauthorized") ||
		!strings.Contains(r.Warnings[0], "read the GPUs directly instead") {
		t.Errorf("refused by the serve: exit %d, %+v", code, r)
	}
}

// TestHealthCommandDoesNotWaitOnAHungServe: a serve that accepts the
// connection and never answers costs --health.serve-timeout, then the
// command reads the GPUs itself and says so; with --health.source=serve
// health is unknown (exit 2). Nothing listening: the same fallback.
func TestHealthCommandDoesNotWaitOnAHungServe(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	})
	hung := "http://" + ln.Addr().String()
	args := []string{"--health.serve-url=" + hung, "--health.serve-timeout=1s", "--backend=sim", "--sim.profile=h100", "--health.kernel-log=", "-o", "json"}
	out, _, code := runHealth(t, args...)
	r := decodeHealth(t, out)
	want := "the serve at " + hung + "/api/v1/health did not answer within 1s; read the GPUs directly instead"
	if code != health.ExitHealthy || r.Source != health.SourceLocal || r.From != "the GPUs" || len(r.Warnings) != 1 || r.Warnings[0] != want {
		t.Errorf("hung serve: exit %d, %+v; want the warning %q", code, r, want)
	}
	out, stderr, code := runHealth(t, "--health.serve-url="+hung, "--health.serve-timeout=1s", "--health.source=serve", "--backend=sim", "--sim.profile=h100", "-o", "line")
	if code != health.ExitUnknown || strings.TrimSpace(out) != "UNKNOWN: health unknown: the serve at "+hung+"/api/v1/health did not answer within 1s" {
		t.Errorf("--health.source=serve, hung serve: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	closed := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	out, _, code = runHealth(t, "--web.listen-address="+closed, "--backend=sim", "--sim.profile=h100", "--health.kernel-log=")
	if code != health.ExitHealthy || !strings.Contains(out, "\nsource: local (the GPUs)\n") ||
		!strings.Contains(out, "\nwarning: no serve answers at http://"+closed+"/api/v1/health (connection refused); read the GPUs directly instead\n") {
		t.Errorf("nothing listening: exit %d\n%s", code, out)
	}
}

// TestHealthCommandReadsTheKernelLog: with no serve, XIDs the kernel
// logged before the command started count: an XID 79 at a simulated
// GPU's PCI address fails that GPU, with the logged time, both from a file
// in /dev/kmsg's format and from a command's output (argv, no shell); an
// application XID does not; a line that cannot be read and an address with
// no GPU are warnings, never verdicts.
func TestHealthCommandReadsTheKernelLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The h100 profile's GPUs: their PCI addresses from gpu_info.
	prom := filepath.Join(dir, "gpus.prom")
	runOK(t, "textfile", "--output="+prom, "--backend=sim", "--sim.profile=dgx-h100")
	text, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	fams := testenv.ParseMetrics(t, string(text))
	busOf := map[string]string{}
	for _, m := range fams["gpu_info"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		busOf[labels["gpu"]] = labels["pci_bus_id"]
	}
	key := func(gpu string) string {
		k, ok := health.PCIKey(busOf[gpu])
		if !ok {
			t.Fatalf("GPU %s's PCI address %q", gpu, busOf[gpu])
		}
		return k
	}
	logged := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	kmsg := filepath.Join(dir, "kmsg")
	writeFile(t, kmsg, strings.Join([]string{
		"6,1,1000,-;Linux version 6.1.0",
		fmt.Sprintf("4,2,2000,-;NVRM: Xid (PCI:%s): 13, pid=77, name=python3, Graphics Exception", key("1")),
		"4,3,3000,-;NVRM: Xid (PCI:%s): garbage",
		"4,4,4000,-;NVRM: Xid (PCI:0000:ee:00): 79, pid=0, GPU has fallen off the bus.",
		"",
	}, "\n"))
	journal := filepath.Join(dir, "journal.txt")
	writeFile(t, journal, fmt.Sprintf("%s node7 kernel: NVRM: Xid (PCI:%s): 79, pid=0, name=swapper/0, GPU has fallen off the bus.\n",
		logged.Format("2006-01-02T15:04:05-0700"), key("5")))

	base := []string{"--health.source=local", "--backend=sim", "--sim.profile=dgx-h100", "-o", "json"}
	out, _, code := runHealth(t, append(base, "--health.kernel-log="+kmsg)...)
	r := decodeHealth(t, out)
	if code != health.ExitHealthy || r.From != "the GPUs and the kernel log "+kmsg || len(r.Warnings) != 2 ||
		!strings.Contains(r.Warnings[0], "kernel log line 3: an NVRM: Xid line gpuwatch cannot read") ||
		!strings.Contains(r.Warnings[1], "XID line(s) for PCI 0000:ee:00, where no GPU was found") {
		t.Errorf("an application XID, a bad line, an unknown address: exit %d, %+v", code, r)
	}

	out, _, code = runHealth(t, append(base, "--health.kernel-log-command=cat", "--health.kernel-log-command="+journal)...)
	r = decodeHealth(t, out)
	if code != health.ExitUnhealthy || len(r.GPUs) != 8 || r.GPUs[5].Status != "fail" || r.GPUs[0].Status != "ok" ||
		!strings.Contains(r.GPUs[5].Reason, "XID 79 (at "+logged.Format(time.RFC3339)+"): GPU has fallen off the bus") ||
		r.From != "the GPUs and the kernel log from cat "+journal || len(r.Warnings) != 0 {
		t.Errorf("XID 79 in the journal: exit %d, %+v", code, r)
	}

	out, _, code = runHealth(t, "--health.source=local", "--backend=sim", "--sim.profile=dgx-h100", "--health.kernel-log="+filepath.Join(dir, "absent"), "-o", "json")
	r = decodeHealth(t, out)
	if code != health.ExitHealthy || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "not read, so XIDs from before this run are not counted") {
		t.Errorf("an absent kernel log: exit %d, %+v", code, r)
	}
	if _, err := os.Stat(filepath.Join(dir, "absent")); err == nil {
		t.Errorf("the absent kernel log was created")
	}
}

// runOK runs gpuwatch with args and returns its stdout; a failure fails
// the test.
func runOK(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(gpuwatchBin, args...).Output()
	if err != nil {
		t.Fatalf("gpuwatch %v: %v", args, err)
	}
	return string(out)
}
