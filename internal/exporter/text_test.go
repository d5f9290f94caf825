package exporter

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// encodeExpfmt renders families the standard way: expfmt's text encoder.
func encodeExpfmt(t testing.TB, mfs []*dto.MetricFamily) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// TestTextMatchesExpfmt holds the direct writer to the client_golang path:
// the same families, HELP and TYPE lines, series and values.
func TestTextMatchesExpfmt(t *testing.T) {
	cases := map[string]struct {
		snap *snapshot.Snapshot
		opts Options
	}{
		"full":          {fullSnapshot(8, 18), Options{Metrics: allOn}},
		"full-pid":      {fullSnapshot(8, 18), Options{Metrics: allOn, PIDLabels: true}},
		"defaults":      {fullSnapshot(3, 4), Options{}},
		"sparse":        {sparseSnapshot(), Options{Metrics: allOn}},
		"escaping":      {escapingSnapshot(), Options{PIDLabels: true}},
		"no-nvlink-ecc": {fullSnapshot(2, 2), Options{Collectors: map[string]bool{"nvlink": false, "ecc": false}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := newExporter(t, c.snap, c.opts)
			want := gather(t, e)
			var buf bytes.Buffer
			if err := e.WriteText(t.Context(), &buf); err != nil {
				t.Fatal(err)
			}
			got := parseText(t, buf.Bytes())

			// Same families, same HELP/TYPE lines.
			wantText, gotText := encodeExpfmt(t, want), buf.Bytes()
			if w, g := headerLines(wantText), headerLines(gotText); w != g {
				t.Errorf("HELP/TYPE lines differ:\nexpfmt:\n%s\ndirect:\n%s", w, g)
			}
			// Same series and values. The snapshot's sample durations
			// differ between the two scrapes; drop that one series.
			ws, gs := series(want), series(got)
			delete(ws, "gpuwatch_snapshot_duration_seconds{}")
			delete(gs, "gpuwatch_snapshot_duration_seconds{}")
			if len(ws) != len(gs) {
				t.Errorf("expfmt has %d series, direct %d", len(ws), len(gs))
			}
			for k, v := range ws {
				if g, ok := gs[k]; !ok || (g != v && !(math.IsNaN(g) && math.IsNaN(v))) {
					t.Errorf("%s: expfmt %v, direct %v (present %v)", k, v, g, ok)
				}
			}
			// Same bytes for every sample value.
			if w, g := sampleValues(wantText), sampleValues(gotText); w != g {
				t.Errorf("sample value bytes differ")
			}
		})
	}
}

func headerLines(text []byte) string {
	var out []string
	for l := range strings.SplitSeq(string(text), "\n") {
		if strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// sampleValues collects the value field of every sample line, sorted, to
// compare number formatting byte for byte.
func sampleValues(text []byte) string {
	var out []string
	for l := range strings.SplitSeq(string(text), "\n") {
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "gpuwatch_snapshot_duration_seconds") {
			continue
		}
		out = append(out, l[strings.LastIndexByte(l, ' ')+1:])
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// expfmtLine renders one gauge sample with one label through expfmt.
func expfmtLine(t testing.TB, labelValue string, v float64) string {
	mf := &dto.MetricFamily{
		Name: new("m"), Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{
			Label: []*dto.LabelPair{{Name: new("l"), Value: new(labelValue)}},
			Gauge: &dto.Gauge{Value: new(v)},
		}},
	}
	return string(encodeExpfmt(t, []*dto.MetricFamily{mf}))
}

func directLine(labelValue string, v float64) string {
	tf := newTextForm("m", "", prometheus.GaugeValue, []string{"l"})
	return "# TYPE m gauge\n" + string(tf.appendSeries(nil, []string{labelValue}, v))
}

func TestLabelAndValueFormattingMatchesExpfmt(t *testing.T) {
	values := []float64{0, 1, -1, 0.5, 1e-9, 85899345920, 1.98e9, 123456789012, math.MaxUint64, math.Inf(1), math.Inf(-1), math.NaN(), 3.14159}
	labels := []string{"", "plain", `q"uote`, `back\slash`, "new\nline", "tab\tcr\r", "ünïcødé 日本 🚀", "\\\"\n\\n"}
	for _, l := range labels {
		for _, v := range values {
			if w, g := expfmtLine(t, l, v), directLine(l, v); w != g {
				t.Errorf("label %q value %v:\nexpfmt %q\ndirect %q", l, v, w, g)
			}
		}
	}
}

// FuzzLabelValue checks the escaper against expfmt for any input; invalid
// UTF-8 is first repaired the way the client_golang path repairs it.
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"", "a", `"`, `\`, "\n", "\xff", "é\xc3", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		valid := s
		if !utf8.ValidString(s) {
			valid = strings.ToValidUTF8(s, "\uFFFD")
		}
		if w, g := expfmtLine(t, valid, 1), directLine(s, 1); w != g {
			t.Errorf("label %q:\nexpfmt %q\ndirect %q", s, w, g)
		}
	})
}

func TestTextHandler(t *testing.T) {
	e := newExporter(t, fullSnapshot(2, 2), Options{})
	extra := prometheus.NewRegistry()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuwatch_build_info", Help: "Build.", ConstLabels: prometheus.Labels{"version": "test"}})
	build.Set(1)
	extra.MustRegister(build)
	h := e.TextHandler(extra)

	for _, gz := range []bool{false, true} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip, deflate")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("status %d", rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != TextContentType {
			t.Errorf("Content-Type %q", ct)
		}
		var body io.Reader = rec.Body
		if gz {
			if rec.Header().Get("Content-Encoding") != "gzip" {
				t.Fatal("no gzip although asked for")
			}
			zr, err := gzip.NewReader(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		text, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		names := familyNames(parseText(t, text))
		for _, want := range []string{"gpu_up", "gpu_power_usage_watts", "gpuwatch_build_info"} {
			found := false
			for _, n := range names {
				found = found || n == want
			}
			if !found {
				t.Errorf("gzip=%v: %s missing from the handler's output", gz, want)
			}
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"": false, "gzip": true, "deflate, gzip": true, "gzip;q=0": false, "gzip; q=0.5": true, "identity": false, "GZIP": true,
	} {
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q) = %v", h, got)
		}
	}
}

func TestAppendIntegralFloatMatchesStrconv(t *testing.T) {
	check := func(f float64) {
		if f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
			return
		}
		want := strconv.AppendFloat(nil, f, 'g', -1, 64)
		if got := appendIntegralFloat(nil, f); string(got) != string(want) {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
	for _, f := range []float64{2, 10, 99999, 999999, 1000000, 1000001, 1e7, 1.5e7, 123456789012, 1 << 52, 1<<53 - 1, 1e15, 9.99e15, -2, -1e6, -1234567, 80 << 30} {
		check(f)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		digits := r.IntN(16) + 1
		v := r.Int64N(int64(math.Pow10(digits)))
		// Bias towards trailing zeros, common in byte sizes and hertz.
		v -= v % int64(math.Pow10(r.IntN(digits)))
		if r.IntN(2) == 0 {
			v = -v
		}
		check(float64(v))
	}
}

// failingGatherer returns one good family and an error, as a Registry does
// when one of its collectors fails.
type failingGatherer struct{}

func (failingGatherer) Gather() ([]*dto.MetricFamily, error) {
	mf := &dto.MetricFamily{Name: new("gpuwatch_build_info"), Help: new("Build."), Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(1)}}}}
	return []*dto.MetricFamily{mf}, errors.New("go collector failed")
}

func TestTextHandlerSurvivesFailingExtra(t *testing.T) {
	e := newExporter(t, fullSnapshot(1, 0), Options{})
	rec := httptest.NewRecorder()
	e.TextHandler(failingGatherer{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	names := familyNames(parseText(t, rec.Body.Bytes()))
	if !slices.Contains(names, "gpu_up") || !slices.Contains(names, "gpuwatch_build_info") {
		t.Errorf("families %v: want the GPUs and the extra gatherer's partial result", names)
	}
}

// utf8NameGatherer returns a family whose name is valid only in the
// UTF-8 names of Prometheus 3, which the 0.0.4 text format cannot carry.
type utf8NameGatherer struct{}

func (utf8NameGatherer) Gather() ([]*dto.MetricFamily, error) {
	return []*dto.MetricFamily{{Name: new("odd.name"), Help: new("Odd."), Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(1)}}}}}, nil
}

func TestTextHandlerEscapesNonLegacyExtraNames(t *testing.T) {
	e := newExporter(t, fullSnapshot(1, 0), Options{})
	rec := httptest.NewRecorder()
	e.TextHandler(utf8NameGatherer{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	names := familyNames(parseText(t, rec.Body.Bytes()))
	if !slices.Contains(names, "odd_name") {
		t.Errorf("odd.name not written as odd_name; families: %v", names)
	}
}
