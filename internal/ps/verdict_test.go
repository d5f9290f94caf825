package ps

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TestVerdictsBelowTheTableAndInJSON: each selected GPU's verdict and
// reason follow the table, one "GPU N" line each, and are the JSON's
// "health"; with no health stage neither appears.
func TestVerdictsBelowTheTableAndInJSON(t *testing.T) {
	s := testSnapshot()
	var plain bytes.Buffer
	if err := WriteTable(&plain, s, Filter{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\nGPU ") {
		t.Errorf("verdicts without a health stage:\n%s", plain.String())
	}
	s.Health = &snapshot.Health{GPUs: []snapshot.GPUHealth{
		{GPU: 3, UUID: "GPU-3", Status: snapshot.HealthFail, Reason: "GPU 3 (GPU-3): XID 79\x1b[31m"},
		{GPU: 0, UUID: "GPU-0", Status: snapshot.HealthOK},
	}}
	var b bytes.Buffer
	if err := WriteTable(&b, s, Filter{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, plain.String()+"\nGPU 0  ok    -\nGPU 3  fail  GPU 3 (GPU-3): XID 79") || strings.Contains(out, "\x1b") {
		t.Errorf("table:\n%q", out)
	}
	b.Reset()
	if err := WriteTable(&b, s, Filter{GPUs: []int{3}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "GPU 0  ok") || !strings.Contains(b.String(), "GPU 3  fail") {
		t.Errorf("--gpu=3:\n%s", b.String())
	}
	b.Reset()
	if err := WriteJSON(&b, s, Filter{}); err != nil {
		t.Fatal(err)
	}
	var doc Document
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Health) != 2 || doc.Health[0] != (Verdict{GPU: 0, UUID: "GPU-0", Verdict: "ok"}) || doc.Health[1].Verdict != "fail" {
		t.Errorf("JSON health = %+v", doc.Health)
	}
}
