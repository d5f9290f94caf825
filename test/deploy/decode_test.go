package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// object is one decoded manifest: its Go API value and where it came from.
type object struct {
	kind, name, namespace string
	value                 any // *appsv1.DaemonSet, *corev1.Service, ...
	source                string
}

// newTyped returns a pointer to the Go API type of apiVersion/kind, or nil.
// ServiceMonitor, PodMonitor and PrometheusRule decode into
// prometheus-operator's own Go types (the ones its CRDs are generated from).
func newTyped(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "apps/v1/DaemonSet":
		return &appsv1.DaemonSet{}
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1/PodMonitor":
		return &monitoringv1.PodMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &monitoringv1.PrometheusRule{}
	}
	return nil
}

// decodeStrict splits a multi-document YAML stream and decodes every
// document into its API type the way the API server's strict field
// validation does: an unknown or duplicated field, or a value of the wrong
// type, is an error (sigs.k8s.io/json is case-sensitive, unlike encoding/json).
func decodeStrict(source string, stream []byte) ([]object, error) {
	reader := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objects []object
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objects, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if string(js) == "null" {
			continue // comments only
		}
		var meta struct {
			metav1.TypeMeta
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(js, &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		where := fmt.Sprintf("%s: %s %q", source, meta.Kind, meta.Metadata.Name)
		typed := newTyped(meta.APIVersion, meta.Kind)
		if typed == nil {
			return nil, fmt.Errorf("%s: no Go type for apiVersion %q kind %q (add it to newTyped)", where, meta.APIVersion, meta.Kind)
		}
		strict, err := kjson.UnmarshalStrict(js, typed, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if len(strict) > 0 {
			return nil, fmt.Errorf("%s: %v", where, errors.Join(strict...))
		}
		objects = append(objects, object{
			kind: meta.Kind, name: meta.Metadata.Name, namespace: meta.Metadata.Namespace,
			value: typed, source: source,
		})
	}
}

// TestDecodeStrictCatches shows that the strict decoder fails on what a
// lenient one would let through, so a pass of the chart means something.
func TestDecodeStrictCatches(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":    "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n",
		"wrong case":       "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec: {template: {spec: {hostpid: true}}}\n",
		"duplicate field":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n",
		"wrong type":       "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: http}]}\n",
		"bad quantity":     "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec: {template: {spec: {containers: [{name: c, resources: {requests: {memory: lots}}}]}}}\n",
		"unknown kind":     "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
		"monitor field":    "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec: {endpoints: [{port: m, intervall: 30s}]}\n",
		"rule field":       "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: x}\nspec: {groups: [{name: g, rules: [{alert: A, expression: up}]}]}\n",
		"second document":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\ndatta: {}\n",
		"hpa metric field": "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: x}\nspec: {metrics: [{type: Pods, pods: {metrik: {name: m}}}]}\n",
	} {
		if _, err := decodeStrict(name, []byte(doc)); err == nil {
			t.Errorf("%s: decoded without error:\n%s", name, doc)
		}
	}
	good := "# comment\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n---\n# only a comment\n"
	objs, err := decodeStrict("good", []byte(good))
	if err != nil || len(objs) != 1 {
		t.Fatalf("a valid ConfigMap: %d objects, %v", len(objs), err)
	}
}
