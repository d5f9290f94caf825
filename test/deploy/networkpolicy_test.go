package deploy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// peerPod is a pod that may try to reach gpuwatch's port.
type peerPod struct {
	what      string
	namespace string
	labels    map[string]string
}

var (
	// The Prometheus pod kube-prometheus-stack's prometheus-operator runs
	// (the labels the operator sets on every Prometheus pod).
	kubePrometheusStackPod = peerPod{"kube-prometheus-stack Prometheus", "monitoring", map[string]string{
		"app.kubernetes.io/name": "prometheus", "app.kubernetes.io/managed-by": "prometheus-operator",
		"app.kubernetes.io/instance": "kube-prometheus-stack-prometheus", "prometheus": "kube-prometheus-stack-prometheus",
		"operator.prometheus.io/name": "kube-prometheus-stack-prometheus", "operator.prometheus.io/shard": "0",
		"app.kubernetes.io/version": "2.54.1",
	}}
	// A Prometheus of a prometheus-operator before v0.50 (kube-prometheus's "k8s").
	oldOperatorPod = peerPod{"prometheus-operator < 0.50 Prometheus", "monitoring", map[string]string{
		"app": "prometheus", "prometheus": "k8s",
	}}
	grafanaPod  = peerPod{"Grafana", "monitoring", map[string]string{"app.kubernetes.io/name": "grafana"}}
	notebookPod = peerPod{"a tenant's notebook", "research", map[string]string{"app": "notebook"}}
	// A tenant's pod labelled like a Prometheus, outside Prometheus's namespace.
	impostorPod = peerPod{"a tenant's pod labelled as Prometheus", "research", map[string]string{"app.kubernetes.io/name": "prometheus"}}
)

// admits evaluates np as a NetworkPolicy implementation would for a TCP
// connection from peer to port of a pod with podLabels in np's namespace.
func admits(t *testing.T, np *networkingv1.NetworkPolicy, podLabels map[string]string, port int32, peer peerPod) bool {
	t.Helper()
	if !selector(t, &np.Spec.PodSelector).Matches(labels.Set(podLabels)) {
		return true // the policy does not isolate this pod
	}
	nsLabels := labels.Set{"kubernetes.io/metadata.name": peer.namespace}
	for _, rule := range np.Spec.Ingress {
		portOK := len(rule.Ports) == 0
		for _, p := range rule.Ports {
			if (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) && (p.Port == nil || p.Port.IntVal == port) {
				portOK = true
			}
		}
		if !portOK {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, from := range rule.From {
			if from.IPBlock != nil {
				continue
			}
			nsOK := peer.namespace == np.Namespace
			if from.NamespaceSelector != nil {
				nsOK = selector(t, from.NamespaceSelector).Matches(nsLabels)
			}
			podOK := from.PodSelector == nil || selector(t, from.PodSelector).Matches(labels.Set(peer.labels))
			if nsOK && podOK {
				return true
			}
		}
	}
	return false
}

func selector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// TestNetworkPolicyAdmitsPrometheusOnly: by default the chart's
// NetworkPolicy admits the Prometheus pods of prometheus-operator and
// kube-prometheus-stack to gpuwatch's port, and no other pod; with the
// namespace override of the install line, only those in that namespace.
func TestNetworkPolicyAdmitsPrometheusOnly(t *testing.T) {
	for _, c := range []struct {
		valuesCase
		admitted, refused []peerPod
	}{
		{valuesCase{name: "defaults"},
			[]peerPod{kubePrometheusStackPod, oldOperatorPod, impostorPod},
			[]peerPod{grafanaPod, notebookPod}},
		{valuesCase{name: "namespace", set: []string{"networkPolicy.prometheus.namespace=monitoring"}},
			[]peerPod{kubePrometheusStackPod, oldOperatorPod},
			[]peerPod{grafanaPod, notebookPod, impostorPod}},
		{valuesCase{name: "port", set: []string{"port=9500"}},
			[]peerPod{kubePrometheusStackPod},
			[]peerPod{notebookPod}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := renderDecoded(t, c.valuesCase)
			np := one[networkingv1.NetworkPolicy](t, r)
			if np == nil {
				t.Fatal("no NetworkPolicy rendered")
			}
			checkNetworkPolicy(t, r, np, c.admitted, c.refused)
		})
	}

	r := renderDecoded(t, valuesCase{name: "off", set: []string{"networkPolicy.enabled=false"}})
	if np := one[networkingv1.NetworkPolicy](t, r); np != nil {
		t.Errorf("networkPolicy.enabled=false still renders %s", np.Name)
	}
}

// checkNetworkPolicy: np isolates the DaemonSet's pods, admits each of
// admitted to the container port and refuses each of refused.
func checkNetworkPolicy(t *testing.T, r rendered, np *networkingv1.NetworkPolicy, admitted, refused []peerPod) {
	t.Helper()
	ds := one[appsv1.DaemonSet](t, r)
	podLabels := ds.Spec.Template.Labels
	port := ds.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort
	if !selector(t, &np.Spec.PodSelector).Matches(labels.Set(podLabels)) {
		t.Fatalf("NetworkPolicy selector %v does not select gpuwatch's pods %v", np.Spec.PodSelector, podLabels)
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policyTypes %v, want [Ingress] (egress to the runtime sockets is local, but DNS and the rest stay open)", np.Spec.PolicyTypes)
	}
	for _, p := range admitted {
		if !admits(t, np, podLabels, port, p) {
			t.Errorf("%s (namespace %s) cannot reach port %d", p.what, p.namespace, port)
		}
	}
	for _, p := range refused {
		if admits(t, np, podLabels, port, p) {
			t.Errorf("%s (namespace %s) reaches port %d", p.what, p.namespace, port)
		}
	}
}
