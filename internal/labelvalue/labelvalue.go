// Package labelvalue bounds label values that come from outside gpuwatch
// (container, image and pod names, Slurm users, accounts and partitions,
// command lines). Prometheus's label_value_length_limit fails the whole
// scrape on one value over it, so a 900 KB container name must not reach
// the exposition as it is.
package labelvalue

import (
	"fmt"
	"hash/fnv"
	"strings"
	"unicode/utf8"
)

// MaxBytes is the longest label value exported. 256 bytes keep every
// Kubernetes name (at most 253) whole and sit well below the limits
// operators set with label_value_length_limit.
const MaxBytes = 256

// marker ends a shortened value: an ellipsis, then a hash of the whole
// value, so two long values that share their beginning stay two series.
const markerBytes = len("…#") + 8

// Bound returns s when it is at most MaxBytes of valid UTF-8. A longer
// value is cut at a rune boundary and ends in "…#" and 8 hex digits of the
// hash of the whole value, MaxBytes in all. Invalid UTF-8 becomes U+FFFD.
func Bound(s string) string {
	if len(s) <= MaxBytes {
		if utf8.ValidString(s) {
			return s
		}
		s = strings.ToValidUTF8(s, "\uFFFD")
		if len(s) <= MaxBytes {
			return s
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	cut := MaxBytes - markerBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…#%08x", strings.ToValidUTF8(s[:cut], "\uFFFD"), h.Sum32())
}

// Truncated reports whether v is a value Bound shortened.
func Truncated(v string) bool {
	i := strings.LastIndex(v, "…#")
	return i >= 0 && len(v)-i == markerBytes
}
