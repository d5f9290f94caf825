package slurm

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseGRES(t *testing.T) {
	cases := []struct {
		in   string
		want []GPUCount
	}{
		{"gpu:a100:4", []GPUCount{{"a100", 4}}},
		{"gpu:4", []GPUCount{{"", 4}}},
		{"gpu", []GPUCount{{"", 1}}},
		{"gpu:h100", []GPUCount{{"h100", 1}}},
		{"gres:gpu:1", []GPUCount{{"", 1}}},
		{"gres:gpu:h100:2", []GPUCount{{"h100", 2}}},
		{"gres/gpu:a100=4", []GPUCount{{"a100", 4}}},
		{"gres/gpu=2", []GPUCount{{"", 2}}},
		{"gres/gpu:1", []GPUCount{{"", 1}}},
		{"gpu:h100:2(IDX:0-1)", []GPUCount{{"h100", 2}}},
		{"gpu:a100:4(S:0-1)", []GPUCount{{"a100", 4}}},
		{"gpu:a100:0(IDX:N/A)", []GPUCount{{"a100", 0}}},
		{"gpu:a100:2(IDX:0,2),mps:100,gpu:t4:1(IDX:1)", []GPUCount{{"a100", 2}, {"t4", 1}}},
		{"mps:200,shard:8", []GPUCount{}},
		{"(null)", nil},
		{"", nil},
		{"N/A", nil},
	}
	for _, c := range cases {
		got, err := ParseGRES(c.in)
		if err != nil {
			t.Errorf("ParseGRES(%q): %v", c.in, err)
			continue
		}
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseGRES(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseGRESErrors(t *testing.T) {
	for _, in := range []string{"gpu:a100:x", "gpu:a100:2(IDX:0-1", "gpu:a100:-1", "gpu:a100:2(IDX:3-1)", "gpu:a100:2(IDX:a)"} {
		_, err := ParseGRES(in)
		if err == nil {
			t.Errorf("ParseGRES(%q): no error", in)
			continue
		}
		if !strings.Contains(err.Error(), "gres entry") {
			t.Errorf("ParseGRES(%q): error %q does not name the entry", in, err)
		}
	}
}

func TestParseGRESDetailIndexes(t *testing.T) {
	got, err := ParseGRESDetail("gpu:h100:3(IDX:0-1,5),gpu:a100:1(IDX:7)")
	if err != nil {
		t.Fatal(err)
	}
	want := []NodeGPUs{{Type: "h100", Count: 3, Indexes: []int{0, 1, 5}}, {Type: "a100", Count: 1, Indexes: []int{7}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestParseTRES(t *testing.T) {
	cases := []struct {
		in   string
		cpus int
		gpus []GPUCount
	}{
		{"cpu=4,mem=8G,gres/gpu:a100=2", 4, []GPUCount{{"a100", 2}}},
		{"cpu=64,mem=512G,node=2,billing=64,gres/gpu=6,gres/gpu:a100=6", 64, []GPUCount{{"a100", 6}}},
		// Typed entries cover 3 of 5: the remaining 2 keep an empty type.
		{"cpu=1,gres/gpu=5,gres/gpu:a100=2,gres/gpu:t4=1", 1, []GPUCount{{"a100", 2}, {"t4", 1}, {"", 2}}},
		{"cpu=1,node=1,billing=1", 1, nil},
		{"gres/gpu=2", 0, []GPUCount{{"", 2}}},
		{"", 0, nil},
	}
	for _, c := range cases {
		cpus, gpus, err := ParseTRES(c.in)
		if err != nil {
			t.Errorf("ParseTRES(%q): %v", c.in, err)
			continue
		}
		if cpus != c.cpus || !reflect.DeepEqual(gpus, c.gpus) {
			t.Errorf("ParseTRES(%q) = %d, %v; want %d, %v", c.in, cpus, gpus, c.cpus, c.gpus)
		}
	}
	for _, bad := range []string{"cpu", "cpu=x", "gres/gpu=two", "gres/gpu:a100=1.5"} {
		if _, _, err := ParseTRES(bad); err == nil {
			t.Errorf("ParseTRES(%q): no error", bad)
		}
	}
}

func TestExpandHostlist(t *testing.T) {
	cases := map[string][]string{
		"vm":                    {"vm"},
		"gpu-[01-03,07],login1": {"gpu-01", "gpu-02", "gpu-03", "gpu-07", "login1"},
		"r[1-2]n[8-9]":          {"r1n8", "r1n9", "r2n8", "r2n9"},
		"node[9-11]":            {"node9", "node10", "node11"},
		"a[1],b":                {"a1", "b"},
		"":                      nil,
		"(null)":                nil,
		"gpu-[001-002]-ib":      {"gpu-001-ib", "gpu-002-ib"},
	}
	for in, want := range cases {
		got, err := ExpandHostlist(in)
		if err != nil {
			t.Errorf("ExpandHostlist(%q): %v", in, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ExpandHostlist(%q) = %v, want %v", in, got, want)
		}
	}
	for _, bad := range []string{"gpu-[01-03", "gpu-01]", "n[a-b]", "n[5-1]", "n[0-999999999]"} {
		if _, err := ExpandHostlist(bad); err == nil {
			t.Errorf("ExpandHostlist(%q): no error", bad)
		}
	}
}

func TestNormalizeNodeState(t *testing.T) {
	cases := []struct {
		base  string
		flags []string
		want  string
	}{
		{"IDLE", nil, "idle"},
		{"mixed", nil, "mixed"},
		{"MIXED", []string{"DRAIN"}, "draining"},
		{"IDLE", []string{"DRAIN"}, "drained"},
		{"DOWN", []string{"DRAIN", "NOT_RESPONDING"}, "down"},
		{"ALLOCATED", []string{"COMPLETING"}, "completing"},
		{"IDLE", []string{"RESERVED"}, "reserved"},
		{"IDLE", []string{"MAINTENANCE", "RESERVED"}, "maint"},
		{"IDLE", []string{"POWERED_DOWN"}, "powered_down"},
		{"idle~", nil, "idle"},
		{"down*", nil, "down"},
		{"drained", nil, "drained"},
		{"mix", nil, "mixed"},
		{"", nil, "unknown"},
		{"IDLE", []string{"FAIL"}, "fail"},
		{"MIXED", []string{"FAIL", "DRAIN"}, "failing"},
		{"mixed", []string{"drain"}, "draining"},
		{"IDLE", []string{"COMPLETING", "PLANNED"}, "planned"},
		{"MIXED", []string{"POWERED_DOWN", "RESERVED"}, "mixed"},
		{"IDLE", []string{"POWER_DOWN"}, "powered_down"},
		{"MIXED", []string{"RESERVED"}, "mixed"},
		{"ERROR", []string{"MAINTENANCE"}, "error"},
		{"future", []string{"DRAIN"}, "future"},
		{"alloc", []string{"RESERVED"}, "allocated"},
		{"drng", nil, "drained"},
		{"*", nil, "unknown"},
	}
	for _, c := range cases {
		if got := normalizeNodeState(c.base, c.flags); got != c.want {
			t.Errorf("normalizeNodeState(%q, %v) = %q, want %q", c.base, c.flags, got, c.want)
		}
	}
}

// TestSplitOutside: commas between the open and close characters do not
// split; parts are trimmed; a stray close does not make depth negative.
func TestSplitOutside(t *testing.T) {
	cases := []struct {
		in          string
		open, close byte
		want        []string
	}{
		{"gpu:a:2(IDX:0,2), gpu:b:1(IDX:1)", '(', ')', []string{"gpu:a:2(IDX:0,2)", "gpu:b:1(IDX:1)"}},
		{"n[1-2,4] ,m1", '[', ']', []string{"n[1-2,4]", "m1"}},
		{"a(1,2),b", '[', ']', []string{"a(1", "2)", "b"}},
		{"a],b[1,2]", '[', ']', []string{"a]", "b[1,2]"}},
		{"", '(', ')', []string{""}},
	}
	for _, c := range cases {
		if got := splitOutside(c.in, c.open, c.close); !slices.Equal(got, c.want) {
			t.Errorf("splitOutside(%q, %q, %q) = %q, want %q", c.in, c.open, c.close, got, c.want)
		}
	}
}
