//go:build cgo

package nvmlbackend

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestCUDAVersion(t *testing.T) {
	for n, want := range map[int]string{12040: "12.4", 11080: "11.8", 13000: "13.0", 12090: "12.9"} {
		if got := cudaVersion(n); got != want {
			t.Errorf("cudaVersion(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestMIGProfile(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA A100-SXM4-80GB MIG 1g.10gb":    "1g.10gb",
		"NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb": "1c.3g.20gb",
		"NVIDIA H100 80GB HBM3 MIG 7g.80gb":    "7g.80gb",
		"NVIDIA H100 80GB HBM3":                "",
	} {
		if got := migProfile(name); got != want {
			t.Errorf("migProfile(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestFieldValueDecoding(t *testing.T) {
	value := func(typ nvml.ValueType, put func(b []byte)) nvml.FieldValue {
		v := nvml.FieldValue{ValueType: uint32(typ)}
		put(v.Value[:])
		return v
	}
	cases := []struct {
		name string
		v    nvml.FieldValue
		want uint64
		ok   bool
	}{
		{"uint", value(nvml.VALUE_TYPE_UNSIGNED_INT, func(b []byte) { binary.LittleEndian.PutUint32(b, 4000000000) }), 4000000000, true},
		{"ulonglong exact above 2^53", value(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, func(b []byte) { binary.LittleEndian.PutUint64(b, 1<<60+1) }), 1<<60 + 1, true},
		{"double", value(nvml.VALUE_TYPE_DOUBLE, func(b []byte) { binary.LittleEndian.PutUint64(b, math.Float64bits(42.9)) }), 42, true},
		{"negative signed", value(nvml.VALUE_TYPE_SIGNED_LONG_LONG, func(b []byte) { binary.LittleEndian.PutUint64(b, uint64(math.MaxUint64)) }), 0, false},
		{"signed int", value(nvml.VALUE_TYPE_SIGNED_INT, func(b []byte) { binary.LittleEndian.PutUint32(b, 7) }), 7, true},
		{"ushort", value(nvml.VALUE_TYPE_UNSIGNED_SHORT, func(b []byte) { binary.LittleEndian.PutUint16(b, 65535) }), 65535, true},
		{"NaN", value(nvml.VALUE_TYPE_DOUBLE, func(b []byte) { binary.LittleEndian.PutUint64(b, math.Float64bits(math.NaN())) }), 0, false},
		{"unknown type", value(nvml.VALUE_TYPE_COUNT, func([]byte) {}), 0, false},
	}
	for _, c := range cases {
		got, ok := fieldUint(c.v)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: fieldUint = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestDownReason(t *testing.T) {
	for ret, want := range map[nvml.Return]string{
		nvml.ERROR_GPU_IS_LOST: "gpu_is_lost",
		nvml.ERROR_UNKNOWN:     "unknown_error",
		nvml.Return(12345):     "nvml_error_12345",
	} {
		if got := downReason(ret); got != want {
			t.Errorf("downReason(%d) = %q, want %q", ret, got, want)
		}
	}
}
