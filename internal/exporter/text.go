package exporter

import (
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// This file writes the Prometheus text exposition format (version 0.0.4)
// directly: per family the same bytes expfmt writes, apart from the order
// of series inside a family (expfmt sorts them; we keep the snapshot's
// order, which Prometheus does not care about) and the order of labels (we
// keep the catalog's, gpu and uuid first; expfmt sorts them by name).
// TestTextMatchesExpfmt holds the two paths to the same parsed result.

// textForm is the part of a metric's exposition that does not change
// between scrapes, built once in the catalog.
type textForm struct {
	header []byte   // "# HELP name help\n# TYPE name gauge\n"
	parts  [][]byte // parts[i] precedes label value i: `name{gpu="`, `",uuid="`, ...
	bare   []byte   // "name " for a metric without labels
}

var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

func newTextForm(name, help string, vt prometheus.ValueType, labels []string) textForm {
	typ := "gauge"
	if vt == prometheus.CounterValue {
		typ = "counter"
	}
	t := textForm{
		header: []byte("# HELP " + name + " " + helpEscaper.Replace(help) + "\n# TYPE " + name + " " + typ + "\n"),
	}
	if len(labels) == 0 {
		t.bare = []byte(name + " ")
	}
	for i, l := range labels {
		if i == 0 {
			t.parts = append(t.parts, []byte(name+"{"+l+`="`))
		} else {
			t.parts = append(t.parts, []byte(`",`+l+`="`))
		}
	}
	return t
}

// appendSeries appends one sample line.
func (t *textForm) appendSeries(b []byte, lvs []string, v float64) []byte {
	if len(t.parts) == 0 {
		b = append(b, t.bare...)
	} else {
		for i, lv := range lvs {
			b = append(b, t.parts[i]...)
			b = appendLabelValue(b, lv)
		}
		b = append(b, `"} `...)
	}
	b = appendFloat(b, v)
	return append(b, '\n')
}

// appendLabelValue escapes a label value as the text format requires
// (backslash, double quote and line feed) and replaces each run of invalid
// UTF-8 with U+FFFD, as the client_golang path does before it
// (strings.ToValidUTF8).
func appendLabelValue(b []byte, s string) []byte {
	// Fast path: ASCII without the three escaped bytes, the case for
	// almost every value.
	i := 0
	for i < len(s) && !labelSpecial[s[i]] {
		i++
	}
	b = append(b, s[:i]...)
	invalidRun := false // inside a run of invalid bytes, already replaced
	for i < len(s) {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				// Like strings.ToValidUTF8: one U+FFFD per run.
				if !invalidRun {
					b = append(b, "\uFFFD"...)
				}
				invalidRun = true
			} else {
				b = append(b, s[i:i+size]...)
				invalidRun = false
			}
			i += size
			continue
		}
		invalidRun = false
		switch c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
		i++
	}
	return b
}

// labelSpecial marks the bytes appendLabelValue cannot copy as they are.
var labelSpecial = func() (t [256]bool) {
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = true
	}
	t['\\'], t['"'], t['\n'] = true, true, true
	return t
}()

// appendFloat formats a sample value exactly as expfmt's writeFloat does.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	case f == math.Trunc(f) && math.Abs(f) < 1<<53:
		return appendIntegralFloat(b, f)
	default:
		return strconv.AppendFloat(b, f, 'g', -1, 64)
	}
}

// appendIntegralFloat formats an integral float with |f| < 2^53 exactly as
// strconv.AppendFloat(b, f, 'g', -1, 64) does, without its shortest-digits
// search (most of the formatting time; counters and byte gauges are
// integers). Below 2^53 every integer is exact, so its shortest
// round-tripping digits are its decimal digits minus trailing zeros, and
// 'g' picks %e when the decimal exponent is 6 or more.
func appendIntegralFloat(b []byte, f float64) []byte {
	var buf [24]byte
	d := strconv.AppendInt(buf[:0], int64(f), 10)
	if d[0] == '-' {
		b = append(b, '-')
		d = d[1:]
	}
	if len(d) <= 6 {
		return append(b, d...)
	}
	exp := len(d) - 1 // at most 15 below 2^53: always two digits
	nd := len(d)
	for nd > 1 && d[nd-1] == '0' {
		nd--
	}
	b = append(b, d[0])
	if nd > 1 {
		b = append(b, '.')
		b = append(b, d[1:nd]...)
	}
	return append(b, 'e', '+', byte('0'+exp/10), byte('0'+exp%10))
}

// writeAssembled writes the per-metric buffers to w as one exposition,
// families in name order like a Registry's Gather, each under its HELP and
// TYPE. The pieces are written as they are rather than joined first, so
// that a page is not held twice in memory (w is buffered: an
// http.ResponseWriter or a gzip writer).
func (em *emitter) writeAssembled(w io.Writer) error {
	for _, m := range catalogByName {
		body := em.bufs[m.id]
		if len(body) == 0 {
			continue
		}
		if _, err := w.Write(m.text.header); err != nil {
			return err
		}
		if _, err := w.Write(body); err != nil {
			return err
		}
	}
	return nil
}
