package deploy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestDaemonSetCommandLineServes starts the built gpuwatch with the
// container arguments and environment the chart renders, its volumes laid
// out under a temporary root the way the kubelet would mount them (host
// paths linked, Secrets written as files), and then asks what the kubelet
// and Prometheus would ask: the liveness and readiness probes as declared,
// and /metrics with the TLS and basic auth of the rendered web
// configuration. The simulator stands in for the GPU (--backend=sim).
func TestDaemonSetCommandLineServes(t *testing.T) {
	for _, c := range valuesCases {
		if !c.knownArgs {
			continue // extraArgs names flags of a later gpuwatch; rendering is checked above
		}
		t.Run(c.name, func(t *testing.T) {
			r := renderDecoded(t, c)
			ds := one[appsv1.DaemonSet](t, r)
			root := shortTempDir(t) // unix socket paths under it must fit in 108 bytes
			secrets := map[string]*corev1.Secret{}
			for _, s := range all[corev1.Secret](r) {
				secrets[s.Name] = s
			}
			// The kubelet's pod-resources directory holds a real gRPC server
			// that allocated the simulated GPU 0 to a pod.
			uuid := simGPU0UUID(t)
			kubeletDir := shortTempDir(t)
			serveKubelet(t, filepath.Join(kubeletDir, "kubelet.sock"), uuid)
			// The job journal's hostPath (DirectoryOrCreate) is a fresh directory.
			hostPaths := map[string]string{"/var/lib/kubelet/pod-resources": kubeletDir, "/var/lib/gpuwatch": shortTempDir(t)}
			if u := c.existingSecret; u != nil {
				secrets[u.name] = u.secret()
			}
			mountVolumes(t, root, ds.Spec.Template.Spec, secrets, hostPaths)
			port := testenv.FreePort(t)
			ctr := ds.Spec.Template.Spec.Containers[0]
			args := containerArgs(t, root, ctr.Args, port)
			p := startGpuwatch(t, append(args, "--backend=sim", "--sim.profile=h100"), ctr.Env)

			client := probeClient()
			deadline := time.Now().Add(30 * time.Second)
			for {
				err := probe(client, ctr.ReadinessProbe, port)
				if err == nil {
					break
				}
				if p.Exited() || time.Now().After(deadline) {
					t.Fatalf("readiness probe still failing (gpuwatch exited: %v): %v\n%s", p.Exited(), err, p.Output)
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err := probe(client, ctr.LivenessProbe, port); err != nil {
				t.Fatalf("liveness probe: %v\n%s", err, p.Output)
			}
			body := checkScrape(t, c, client, port)
			// dcgm-exporter's series name their node in Hostname (hostname
			// from its release 4.9 on): the DaemonSet passes it in NODE_NAME.
			cmdline := strings.Join(ctr.Args, " ")
			hostLabel := "Hostname"
			if strings.Contains(cmdline, "--compat.dcgm-version=4.9") || strings.Contains(cmdline, "--compat.dcgm-version=4.10") {
				hostLabel = "hostname"
			}
			if compat := strings.Contains(cmdline, "--compat=dcgm"); compat != strings.Contains(body, hostLabel+`="`+testNodeName+`"`) {
				t.Errorf("--compat=dcgm in the args: %v, but %s=%q in /metrics: %v\n%s", compat, hostLabel, testNodeName, !compat, grepLines(body, "DCGM_FI_DEV_"))
			}
			allocation := `gpu_kubernetes_allocation_info{gpu="0",uuid="` + uuid + `",mig_uuid="",namespace="research",pod="trainer-0",container="train"} 1`
			if wantAllocation := !containsSet(c, "attribution.enabled=false"); wantAllocation != strings.Contains(body, allocation) {
				t.Errorf("pod-resources through the chart's mount: want %s in /metrics: %v\n%s", allocation, wantAllocation, grepLines(body, "gpu_kubernetes_allocation_info"))
			}
		})
	}
}

// mountVolumes lays out the pod's volume mounts under root: a hostPath
// becomes a symlink to the same path on this machine, or to its stand-in in
// hostPaths (the runtime sockets are absent here, as on a node without
// that runtime), a Secret volume a
// directory of its files. TLS key pairs named by the chart but created by
// the user (cert-manager) get a fresh self-signed pair.
func mountVolumes(t *testing.T, root string, pod corev1.PodSpec, secrets map[string]*corev1.Secret, hostPaths map[string]string) {
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		dst := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		v := volumes[m.Name]
		switch {
		case v.HostPath != nil:
			target := v.HostPath.Path
			if standIn, ok := hostPaths[target]; ok {
				target = standIn
			}
			if err := os.Symlink(target, dst); err != nil {
				t.Fatal(err)
			}
		case v.Secret != nil:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			s, ok := secrets[v.Secret.SecretName]
			if !ok {
				writeKeyPair(t, dst) // the user's kubernetes.io/tls Secret
				continue
			}
			if _, ok := s.StringData["tls.key"]; ok {
				writeKeyPair(t, dst) // a key pair the user keeps beside web-config.yml
			}
			for name, content := range s.StringData {
				if name == "tls.crt" || name == "tls.key" {
					continue
				}
				// Paths inside the file name other mounts: they live under root too.
				content = strings.ReplaceAll(content, "/etc/gpuwatch/", root+"/etc/gpuwatch/")
				if err := os.WriteFile(filepath.Join(dst, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("volume %q: no way to lay out %+v", m.Name, v.VolumeSource)
		}
	}
}

// containerArgs rewrites the rendered arguments for this machine: paths in
// the container's filesystem move under root, and gpuwatch listens on a
// free loopback port instead of the container port.
func containerArgs(t *testing.T, root string, args []string, port int) []string {
	var out []string
	sawListen := false
	for _, a := range args {
		name, value, ok := strings.Cut(a, "=")
		switch {
		case name == "--web.listen-address":
			sawListen = true
			a = fmt.Sprintf("%s=127.0.0.1:%d", name, port)
		case ok && strings.HasPrefix(value, "/"):
			a = name + "=" + filepath.Join(root, value)
		}
		out = append(out, a)
	}
	if !sawListen {
		t.Fatalf("no --web.listen-address in %v", args)
	}
	return out
}

// probe does what the kubelet does for an httpGet or tcpSocket probe
// (HTTPS probes skip certificate checks, as the kubelet's do). The
// container's named port is the one gpuwatch listens on here.
func probe(client *http.Client, p *corev1.Probe, port int) error {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	switch {
	case p.HTTPGet != nil:
		url := fmt.Sprintf("%s://%s%s", strings.ToLower(string(p.HTTPGet.Scheme)), addr, p.HTTPGet.Path)
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
		return nil
	case p.TCPSocket != nil:
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return fmt.Errorf("probe %+v: neither httpGet nor tcpSocket", p)
}

// checkScrape fetches /metrics as the ServiceMonitor's Prometheus would and
// returns the page.
func checkScrape(t *testing.T, c valuesCase, client *http.Client, port int) string {
	scheme := "http"
	if containsSet(c, "webConfig.tls.enabled=true") || (c.existingSecret != nil && c.existingSecret.tls) {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://127.0.0.1:%d/metrics", scheme, port)
	get := func(auth bool) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth {
			req.SetBasicAuth(testUser, testPassword)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	basicAuth := containsSet(c, "webConfig.basicAuth.enabled=true") || (c.existingSecret != nil && c.existingSecret.basicAuth)
	code, body := get(basicAuth)
	if code != http.StatusOK || !strings.Contains(body, "gpu_up{") {
		t.Fatalf("GET %s: %d, want 200 with gpu_up:\n%.300s", url, code, body)
	}
	if basicAuth {
		if code, _ := get(false); code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", url, code)
		}
	}
	return body
}

// grepLines returns the lines of text containing s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// shortTempDir is a temporary directory with a short path.
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "gwd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// simGPU0UUID is the UUID the h100 simulator gives GPU 0.
func simGPU0UUID(t *testing.T) string {
	out := filepath.Join(t.TempDir(), "gpu.prom")
	if msg, err := exec.Command(gpuwatchBin, "textfile", "--backend=sim", "--sim.profile=h100", "--output="+out).CombinedOutput(); err != nil {
		t.Fatalf("gpuwatch textfile: %v\n%s", err, msg)
	}
	page, _ := os.ReadFile(out)
	m := regexp.MustCompile(`gpu_up\{gpu="0",uuid="([^"]+)"\}`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no gpu_up for GPU 0 in:\n%s", page)
	}
	return string(m[1])
}

// fakeKubelet answers the kubelet's pod-resources List: one pod holding GPU 0.
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	uuid string
}

func (f *fakeKubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{
		Name: "trainer-0", Namespace: "research",
		Containers: []*podresourcesv1.ContainerResources{{
			Name:    "train",
			Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{f.uuid}}},
		}},
	}}}, nil
}

// serveKubelet serves the pod-resources API on a unix socket until the test ends.
func serveKubelet(t *testing.T, socket, uuid string) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, &fakeKubelet{uuid: uuid})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
}

func containsSet(c valuesCase, s string) bool {
	return slices.Contains(c.set, s)
}

func probeClient() *http.Client {
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
}

// secret is the user's Secret as the kubelet would mount it: web-config.yml,
// and with TLS the key pair it names (written fresh by mountVolumes).
func (u *userWebConfig) secret() *corev1.Secret {
	cfg := ""
	data := map[string]string{}
	if u.tls {
		cfg += "tls_server_config:\n  cert_file: /etc/gpuwatch/web/tls.crt\n  key_file: /etc/gpuwatch/web/tls.key\n"
		data["tls.crt"], data["tls.key"] = "", ""
	}
	if u.basicAuth {
		cfg += "basic_auth_users:\n  " + testUser + ": " + testBcrypt + "\n"
	}
	data["web-config.yml"] = cfg
	s := &corev1.Secret{StringData: data}
	s.Name = u.name
	return s
}

// writeKeyPair writes a self-signed tls.crt and tls.key into dir.
func writeKeyPair(t *testing.T, dir string) {
	testenv.SelfSignedCert(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
}

// testNodeName is the node the emulated pod runs on (its spec.nodeName).
const testNodeName = "gpu-node-7"

// startGpuwatch runs the binary with args and the container's environment
// (spec.nodeName is testNodeName); it is stopped when the test ends.
func startGpuwatch(t *testing.T, args []string, env []corev1.EnvVar) *testenv.Process {
	environ := os.Environ()
	for _, e := range env {
		value := e.Value
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			value = testNodeName
		default:
			t.Fatalf("env %s: valueFrom %+v cannot be reproduced here", e.Name, e.ValueFrom)
		}
		environ = append(environ, e.Name+"="+value)
	}
	return testenv.StartProcess(t, environ, gpuwatchBin, args...)
}
