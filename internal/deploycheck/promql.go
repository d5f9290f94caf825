package deploycheck

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Selector is one vector selector of an expression.
type Selector struct {
	Metric   string
	Matchers []*labels.Matcher // without the __name__ matcher
}

// Matcher returns the selector's matcher on label l, or nil.
func (s Selector) Matcher(l string) *labels.Matcher {
	for _, m := range s.Matchers {
		if m.Name == l {
			return m
		}
	}
	return nil
}

// Parse parses a PromQL expression with Prometheus' own parser and returns
// its vector selectors.
func Parse(expr string) ([]Selector, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []Selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := Selector{Metric: vs.Name}
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName {
				if s.Metric == "" && m.Type == labels.MatchEqual {
					s.Metric = m.Value
				}
				continue
			}
			s.Matchers = append(s.Matchers, m)
		}
		out = append(out, s)
		return nil
	})
	return out, nil
}

// CheckNames parses expr and returns an error for each selector without a
// literal metric name or naming a metric the catalog lacks.
func (c Catalog) CheckNames(expr string) ([]Selector, []error) {
	sels, err := Parse(expr)
	if err != nil {
		return nil, []error{fmt.Errorf("does not parse: %v", err)}
	}
	var errs []error
	for _, s := range sels {
		switch _, ok := c[s.Metric]; {
		case s.Metric == "":
			errs = append(errs, fmt.Errorf("a selector without a metric name"))
		case !ok:
			errs = append(errs, fmt.Errorf("metric %s exists neither in gpuwatch's catalog, node_exporter's, Prometheus' own, nor the recording rules", s.Metric))
		}
	}
	return sels, errs
}

// outputLabels are the labels a recording rule's result keeps: the grouping
// of its outermost aggregation (through parentheses and arithmetic with
// scalars), or, for a join, those of its left side.
func outputLabels(expr string) ([]string, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var walk func(parser.Expr) []string
	walk = func(e parser.Expr) []string {
		switch e := e.(type) {
		case *parser.AggregateExpr:
			if e.Without {
				return nil
			}
			return e.Grouping
		case *parser.ParenExpr:
			return walk(e.Expr)
		case *parser.BinaryExpr:
			if e.LHS.Type() == parser.ValueTypeVector {
				return walk(e.LHS)
			}
			return walk(e.RHS)
		}
		return nil
	}
	return walk(e), nil
}

var variableRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}|\$([A-Za-z_][A-Za-z0-9_]*)|\[\[([A-Za-z_][A-Za-z0-9_]*)\]\]`)

// Variables returns the names of the Grafana variables expr refers to.
func Variables(expr string) []string {
	var out []string
	for _, m := range variableRef.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1]+m[2]+m[3])
	}
	return out
}

// Substitute replaces Grafana variables as Grafana would before sending the
// query: values for the dashboard's own, and sensible durations for the
// built-in interval variables. A variable without a value stays.
func Substitute(expr string, values map[string]string) string {
	return variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if v, ok := values[name]; ok {
			return v
		}
		if v, ok := builtins[name]; ok {
			return v
		}
		return ref
	})
}

// builtins stand in for Grafana's interval variables. $__rate_interval is
// at least four scrape intervals (Grafana's rule), here for a 1 s scrape in
// the end-to-end test and well above the default 15 s in production.
var builtins = map[string]string{
	"__rate_interval": "1m",
	"__interval":      "15s",
	"__range":         "1h",
}

// AllValue is what Grafana sends for a multi-value variable set to All with
// allValue ".*".
const AllValue = ".*"

// hasVariable reports whether a matcher's value came from variable v.
func hasVariable(m *labels.Matcher, sentinel string) bool {
	return m != nil && strings.Contains(m.Value, sentinel) &&
		(m.Type == labels.MatchRegexp || m.Type == labels.MatchEqual)
}
