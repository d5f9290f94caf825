package testenv

import "testing"

func TestSampleFindsTheSeriesByLabels(t *testing.T) {
	page := `# TYPE gpu_up gauge
gpu_up{gpu="0",uuid="GPU-a"} 1
gpu_up{gpu="1",uuid="GPU-b"} 0
# TYPE gpu_xid_errors_total counter
gpu_xid_errors_total{gpu="1",xid="79"} 2
# TYPE gpu_fan untyped
gpu_fan{gpu="10"} 0.5
`
	m := ParseMetrics(t, page)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
		ok     bool
	}{
		{"gpu_up", map[string]string{"gpu": "1"}, 0, true},
		{"gpu_up", map[string]string{"gpu": "0", "uuid": "GPU-a"}, 1, true},
		{"gpu_up", map[string]string{"gpu": "0", "uuid": "GPU-b"}, 0, false},
		{"gpu_up", map[string]string{"gpu": "2"}, 0, false},
		{"gpu_xid_errors_total", map[string]string{"xid": "79"}, 2, true},
		{"gpu_fan", map[string]string{"gpu": "1"}, 0, false}, // labels match exactly, not by prefix
		{"gpu_fan", nil, 0.5, true},
		{"gpu_power_watts", nil, 0, false},
	} {
		got, ok := Sample(m, c.name, c.labels)
		if got != c.want || ok != c.ok {
			t.Errorf("Sample(%s, %v) = %v, %v; want %v, %v", c.name, c.labels, got, ok, c.want, c.ok)
		}
	}
}

func TestNear(t *testing.T) {
	for _, c := range []struct {
		got, want, rel float64
		near           bool
	}{
		{100.5, 100, 0.01, true},
		{102, 100, 0.01, false},
		{0.005, 0, 0.01, true}, // below 1 the tolerance is absolute
		{0.02, 0, 0.01, false},
		{-100.5, -100, 0.01, true},
	} {
		if Near(c.got, c.want, c.rel) != c.near {
			t.Errorf("Near(%v, %v, %v) = %v, want %v", c.got, c.want, c.rel, !c.near, c.near)
		}
	}
}
