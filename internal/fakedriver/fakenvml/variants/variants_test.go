//go:build cgo

package variants

import (
	"strings"
	"testing"
)

func TestSelect(t *testing.T) {
	vs, err := Select("")
	if err != nil || len(vs) != len(Default) {
		t.Fatalf("Select(\"\") = %d variants, %v", len(vs), err)
	}
	all, err := Select("*")
	if err != nil || len(all) <= len(vs) || all[len(all)-1].Name != "all" {
		t.Fatalf("Select(*) = %d variants, %v", len(all), err)
	}
	one, err := Select("r535")
	if err != nil || len(one) != 1 || one[0].Name != "R535" || len(one[0].Symbols) < 300 {
		t.Fatalf("Select(r535) = %+v, %v", one, err)
	}
	if _, err := Select("R999"); err == nil || !strings.Contains(err.Error(), "variants: R470,") {
		t.Fatalf("Select(R999): %v", err)
	}
	basic, _ := Select("basic")
	if n := len(basic[0].Symbols); n != 20 {
		t.Errorf("basic exports %d functions, want Basic's twenty", n)
	}
}

func TestVersionScript(t *testing.T) {
	got := versionScript([]string{"nvmlInit_v2", "nvmlShutdown"})
	want := "{\n  global:\n    nvmlInit_v2;\n    nvmlShutdown;\n  local: *;\n};\n"
	if got != want {
		t.Errorf("version script:\n%s\nwant:\n%s", got, want)
	}
}
