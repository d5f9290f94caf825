package deploy

import (
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// rendered is one `helm template` of the chart, decoded.
type rendered struct {
	objects []object
}

// renderDecoded renders a case and decodes every object strictly.
func renderDecoded(t testing.TB, c valuesCase) rendered {
	t.Helper()
	objs, err := decodeStrict("helm template ("+c.name+")", renderChart(t, c))
	if err != nil {
		t.Fatal(err)
	}
	return rendered{objects: objs}
}

// all returns every object of a kind.
func all[T any](r rendered) []*T {
	var out []*T
	for _, o := range r.objects {
		if v, ok := o.value.(*T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the only object of a kind, or nil when there is none.
func one[T any](t testing.TB, r rendered) *T {
	t.Helper()
	objs := all[T](r)
	if len(objs) > 1 {
		t.Fatalf("%d objects of type %T, want at most one", len(objs), objs[0])
	}
	if len(objs) == 0 {
		return nil
	}
	return objs[0]
}

// TestChartRendersStrictly renders the chart with each values case and
// checks that every object decodes strictly into its API type and that the
// objects fit together: selectors select, ports and volumes named exist,
// names and labels are valid.
func TestChartRendersStrictly(t *testing.T) {
	for _, c := range valuesCases {
		t.Run(c.name, func(t *testing.T) {
			r := renderDecoded(t, c)
			checkMetadata(t, c, r)
			ds := one[appsv1.DaemonSet](t, r)
			if ds == nil {
				t.Fatal("no DaemonSet rendered")
			}
			checkDaemonSet(t, c, ds)
			checkService(t, c, r, ds)
			checkMonitors(t, c, r, ds)
		})
	}
}

func checkMetadata(t *testing.T, c valuesCase, r rendered) {
	for _, o := range r.objects {
		where := o.kind + " " + o.name
		if errs := validation.IsDNS1123Subdomain(o.name); len(errs) > 0 {
			t.Errorf("%s: invalid name: %v", where, errs)
		}
		wantNS := "gpuwatch"
		if o.kind == "ConfigMap" && slices.Contains(c.set, "dashboards.namespace=monitoring") {
			wantNS = "monitoring"
		}
		if o.namespace != wantNS {
			t.Errorf("%s: namespace %q, want %q (plain manifests need it set)", where, o.namespace, wantNS)
		}
		for k, v := range labelsOf(o) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("%s: label key %q: %v", where, k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s: label %s=%q: %v", where, k, v, errs)
			}
		}
	}
}

// labelsOf returns an object's metadata labels.
func labelsOf(o object) map[string]string {
	type labelled interface{ GetLabels() map[string]string }
	if l, ok := o.value.(labelled); ok {
		return l.GetLabels()
	}
	return nil
}

func checkDaemonSet(t *testing.T, c valuesCase, ds *appsv1.DaemonSet) {
	pod := ds.Spec.Template.Spec
	if !selects(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
		t.Errorf("DaemonSet selector %v does not select its pods %v", ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
	}
	if !pod.HostPID {
		t.Error("hostPID is off: the driver's host PIDs would name no process")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range ctr.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Errorf("volumeMount %q names no volume", m.Name)
			continue
		}
		// The one writable host path: the job journal's own directory.
		journal := m.Name == "accounting" && m.MountPath == "/var/lib/gpuwatch"
		if v.HostPath != nil && journal && (v.HostPath.Path == "/" || !strings.Contains(v.HostPath.Path, "gpuwatch")) {
			t.Errorf("the job journal is mounted writable from %s, not a directory of its own", v.HostPath.Path)
		}
		if v.HostPath != nil && !m.ReadOnly && !journal {
			t.Errorf("host path %s is mounted writable at %s", v.HostPath.Path, m.MountPath)
		}
	}
	ports := map[string]int32{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, probe := range map[string]*corev1.Probe{"liveness": ctr.LivenessProbe, "readiness": ctr.ReadinessProbe} {
		if probe == nil {
			t.Errorf("no %s probe", name)
			continue
		}
		var port string
		switch {
		case probe.HTTPGet != nil:
			port = probe.HTTPGet.Port.String()
		case probe.TCPSocket != nil:
			port = probe.TCPSocket.Port.String()
		default:
			t.Errorf("%s probe is neither httpGet nor tcpSocket", name)
		}
		if _, ok := ports[port]; !ok {
			t.Errorf("%s probe port %q is no container port (%v)", name, port, ports)
		}
	}
	sc := ctr.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container securityContext %+v: want no privilege escalation and a read-only root", sc)
	}
	if ctr.Resources.Requests.Memory().IsZero() || ctr.Resources.Requests.Cpu().IsZero() {
		t.Errorf("no CPU or memory request: %v", ctr.Resources.Requests)
	}
	if len(c.set) == 0 {
		checkDefaultPlacement(t, pod)
	}
	for _, s := range c.set {
		if v, ok := strings.CutPrefix(s, "runtimeClassName="); ok && (pod.RuntimeClassName == nil || *pod.RuntimeClassName != v) {
			t.Errorf("runtimeClassName %v, want %q", pod.RuntimeClassName, v)
		}
		if v, ok := strings.CutPrefix(s, "priorityClassName="); ok && pod.PriorityClassName != v {
			t.Errorf("priorityClassName %q, want %q", pod.PriorityClassName, v)
		}
	}
}

// checkDefaultPlacement: by default gpuwatch lands on GPU nodes only, tainted or not.
func checkDefaultPlacement(t *testing.T, pod corev1.PodSpec) {
	na := pod.Affinity
	if na == nil || na.NodeAffinity == nil || na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatal("no required node affinity")
	}
	found := false
	for _, term := range na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			found = found || (e.Key == "nvidia.com/gpu.present" && e.Operator == corev1.NodeSelectorOpIn && slices.Equal(e.Values, []string{"true"}))
		}
	}
	if !found {
		t.Error("node affinity does not require nvidia.com/gpu.present=true")
	}
	tolerates := slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "nvidia.com/gpu" && tol.Operator == corev1.TolerationOpExists
	})
	if !tolerates {
		t.Errorf("no toleration of the nvidia.com/gpu taint: %v", pod.Tolerations)
	}
}

func checkService(t *testing.T, c valuesCase, r rendered, ds *appsv1.DaemonSet) {
	svc := one[corev1.Service](t, r)
	if svc == nil {
		if !slices.Contains(c.set, "service.enabled=false") {
			t.Error("no Service rendered")
		}
		return
	}
	if !selects(svc.Spec.Selector, ds.Spec.Template.Labels) {
		t.Errorf("Service selector %v does not select the DaemonSet's pods %v", svc.Spec.Selector, ds.Spec.Template.Labels)
	}
	for _, p := range svc.Spec.Ports {
		if !slices.ContainsFunc(ds.Spec.Template.Spec.Containers[0].Ports, func(cp corev1.ContainerPort) bool {
			return cp.Name == p.TargetPort.String()
		}) {
			t.Errorf("Service port %s targets %q, which the container does not declare", p.Name, p.TargetPort.String())
		}
	}
}

func checkMonitors(t *testing.T, c valuesCase, r rendered, ds *appsv1.DaemonSet) {
	tls := slices.Contains(c.set, "webConfig.tls.enabled=true")
	basicAuth := slices.Contains(c.set, "webConfig.basicAuth.enabled=true")
	// compat=dcgm: the DCGM_FI_* series get dcgm-exporter's chart's labels
	// (monitorTargetLabels auto), see TestChartDCGMTargetLabels.
	dcgmTargets := slices.ContainsFunc(c.set, func(s string) bool { return strings.HasPrefix(s, "compat=dcgm") })
	checkScrape := func(where, scheme string, relabel, metricRelabel []monitoringv1.RelabelConfig, tlsc *monitoringv1.SafeTLSConfig, ba *monitoringv1.BasicAuth) {
		if want := map[bool]string{true: "https", false: "http"}[tls]; scheme != want {
			t.Errorf("%s: scheme %q, want %q", where, scheme, want)
		}
		if tls != (tlsc != nil) {
			t.Errorf("%s: tlsConfig %v with TLS %v", where, tlsc, tls)
		}
		if basicAuth != (ba != nil) {
			t.Errorf("%s: basicAuth %v with basic auth %v", where, ba, basicAuth)
		}
		if dcgmTargets {
			if !slices.ContainsFunc(metricRelabel, func(rc monitoringv1.RelabelConfig) bool { return rc.Regex == "DCGM_FI_.+" }) {
				t.Errorf("%s: compat=dcgm without the metricRelabelings that limit the target's labels to DCGM_FI_* series", where)
			}
			return
		}
		// gpuwatch's owner labels (pod, namespace, container) must not be
		// renamed by the target's: the chart drops the target's copies.
		if !slices.ContainsFunc(relabel, func(rc monitoringv1.RelabelConfig) bool {
			return strings.EqualFold(rc.Action, "labeldrop") && rc.Regex != "" &&
				strings.Contains(rc.Regex, "pod") && strings.Contains(rc.Regex, "namespace") && strings.Contains(rc.Regex, "container")
		}) {
			t.Errorf("%s: no labeldrop of the target's pod, namespace and container labels", where)
		}
	}
	for _, sm := range all[monitoringv1.ServiceMonitor](r) {
		svc := one[corev1.Service](t, r)
		if svc == nil {
			t.Fatal("a ServiceMonitor without a Service")
		}
		if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
			t.Errorf("ServiceMonitor selector %v does not select the Service %v", sm.Spec.Selector.MatchLabels, svc.Labels)
		}
		for _, ep := range sm.Spec.Endpoints {
			if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
				t.Errorf("ServiceMonitor endpoint port %q is not a Service port", ep.Port)
			}
			checkScrape("ServiceMonitor", ep.Scheme, ep.RelabelConfigs, ep.MetricRelabelConfigs, safeTLS(ep.TLSConfig), ep.BasicAuth)
		}
	}
	for _, pm := range all[monitoringv1.PodMonitor](r) {
		if !selects(pm.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
			t.Errorf("PodMonitor selector %v does not select the pods %v", pm.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			if ep.Port == nil || !slices.ContainsFunc(ds.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == *ep.Port }) {
				t.Errorf("PodMonitor endpoint port %v is not a container port", ep.Port)
			}
			checkScrape("PodMonitor", ep.Scheme, ep.RelabelConfigs, ep.MetricRelabelConfigs, ep.TLSConfig, ep.BasicAuth)
		}
	}
	wantSM := slices.Contains(c.set, "serviceMonitor.enabled=true")
	if got := len(all[monitoringv1.ServiceMonitor](r)); got != map[bool]int{true: 1}[wantSM] {
		t.Errorf("%d ServiceMonitors, want serviceMonitor.enabled=%v", got, wantSM)
	}
}

// selects reports whether a label selector's matchLabels select labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false // selects everything: never what the chart means
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// safeTLS is the SafeTLSConfig inside a ServiceMonitor's TLSConfig.
func safeTLS(c *monitoringv1.TLSConfig) *monitoringv1.SafeTLSConfig {
	if c == nil {
		return nil
	}
	return &c.SafeTLSConfig
}
