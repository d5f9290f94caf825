package health

import (
	"strings"
	"testing"
)

func TestReportExitCodeAndText(t *testing.T) {
	for status, want := range map[string]int{"ok": 0, "warn": 0, "fail": 1, "unknown": 2, "": 2} {
		if got := (Report{Status: status}).ExitCode(); got != want {
			t.Errorf("ExitCode(%q) = %d, want %d", status, got, want)
		}
	}
	r := Report{Status: "fail", Reason: "GPU 1 (GPU-b): XID 79\nforged line\x1b[31m",
		GPUs: []GPUReport{
			{GPU: 0, UUID: "GPU-a", Status: "ok", Checks: []CheckReport{{Name: "xid", Status: "ok"}}},
			{GPU: 1, UUID: "GPU-b", Status: "fail", Checks: []CheckReport{{Name: "xid", Status: "fail", Reason: "XID 79"}, {Name: "gpu_lost", Status: "ok"}}},
		},
		Node: []CheckReport{{Name: "gpu_count", Status: "fail", Reason: "3 GPU(s) found, 4 expected"}}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "FAIL: GPU 1 (GPU-b): XID 79 forged line [31m\n" +
		"GPU 0  ok       GPU-a\n" +
		"GPU 1  fail     GPU-b\n" +
		"    xid fail: XID 79\n" +
		"node  gpu_count fail: 3 GPU(s) found, 4 expected\n"
	if b.String() != want {
		t.Errorf("text =\n%q\nwant\n%q", b.String(), want)
	}
}
