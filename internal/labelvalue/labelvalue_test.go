package labelvalue

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	short := "vllm-server"
	if got := Bound(short); got != short {
		t.Errorf("Bound(%q) = %q", short, got)
	}
	huge := strings.Repeat("é", 450000) // 900 KB
	got := Bound(huge)
	if len(got) > MaxBytes || !utf8.ValidString(got) || !Truncated(got) || !strings.HasPrefix(got, "éé") {
		t.Errorf("900 KB value bounded to %d bytes %q (truncated=%v)", len(got), got, Truncated(got))
	}
	a, b := strings.Repeat("x", 300)+"a", strings.Repeat("x", 300)+"b"
	if Bound(a) == Bound(b) {
		t.Error("two long values sharing their first 300 bytes became one")
	}
	if first, again := Bound(a), Bound(a); first != again {
		t.Errorf("Bound is not stable: %q then %q", first, again)
	}
	if got := Bound("a\xffb"); got != "a\uFFFDb" {
		t.Errorf("invalid UTF-8: %q", got)
	}
	if Truncated(short) {
		t.Error("a short value reads as truncated")
	}
}
