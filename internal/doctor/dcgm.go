package doctor

import (
	"fmt"
	"strconv"
	"strings"
)

// DCGMPanel is what one panel of dcgm-exporter's released dashboard (Grafana
// 12239) shows on this host with --compat=dcgm: the GPUs that have its
// metric and those that do not, with why.
type DCGMPanel struct {
	Title, Metric   string
	Served, Missing []int
	Why             string
}

// checkDCGMDashboard lists, with --compat=dcgm, the panels of dcgm-exporter's
// released dashboard that stay empty on this host (on every GPU or on
// some). An empty panel is a fact of the hardware, not a fault of the
// host, so it never makes doctor exit non-zero.
func checkDCGMDashboard(env Env) []Result {
	if !env.DCGMCompat || env.Snapshot == nil {
		return nil
	}
	var out []Result
	for _, p := range env.DCGMPanels {
		check := "dcgm dashboard: " + p.Title
		switch {
		case len(p.Missing) == 0 && len(p.Served) > 0:
			out = append(out, ok(check, fmt.Sprintf("%s on GPU %s", p.Metric, intList(p.Served))))
		case len(p.Served) == 0:
			out = append(out, fail(check, fmt.Sprintf("empty: no GPU serves %s", p.Metric), p.Why, false))
		default:
			out = append(out, fail(check, fmt.Sprintf("%s on GPU %s; none on GPU %s", p.Metric, intList(p.Served), intList(p.Missing)), p.Why, false))
		}
	}
	return out
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
