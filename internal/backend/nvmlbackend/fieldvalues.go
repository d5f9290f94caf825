//go:build cgo

package nvmlbackend

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// fieldBatch is the one GetFieldValues call a device read makes: memory
// temperature, PCIe byte counters and per-link NVLink traffic, for the
// groups that are enabled. One call instead of one per reading keeps a
// scrape's NVML round-trips down.
type fieldBatch struct {
	values []nvml.FieldValue
	// groups[i] is the group that asked for values[i].
	groups []groupID
	// failed is set when the call itself failed; every lookup then misses.
	failed bool
}

// readFieldBatch builds the request from the enabled groups, makes the call
// and splits its time between the groups in proportion to their fields.
func (d *deviceReader) readFieldBatch() {
	if d.gone != "" || !d.can(callGetFieldValues) {
		return
	}
	b := &d.fields
	b.values = d.st.fields[:0]
	b.groups = d.st.fieldGroups[:0]
	ask := func(g groupID, id uint32, scope uint32) {
		if !d.r.caps.knowsField(id) {
			return
		}
		b.values = append(b.values, nvml.FieldValue{FieldId: id, ScopeId: scope})
		b.groups = append(b.groups, g)
	}
	if d.r.groups[gTemperature] {
		ask(gTemperature, nvml.FI_DEV_MEMORY_TEMP, 0)
	}
	if d.r.groups[gPCIe] {
		ask(gPCIe, nvml.FI_DEV_PCIE_COUNT_TX_BYTES, 0)
		ask(gPCIe, nvml.FI_DEV_PCIE_COUNT_RX_BYTES, 0)
	}
	if d.r.groups[gNVLink] {
		for _, link := range d.st.nvlinks {
			ask(gNVLink, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, uint32(link))
			ask(gNVLink, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, uint32(link))
		}
	}
	// Keep the grown buffers for the next read.
	d.st.fields, d.st.fieldGroups = b.values, b.groups
	if len(b.values) == 0 {
		return
	}

	start := time.Now()
	ret := d.callFieldValues(b.values)
	d.lastEnd = time.Now()
	elapsed := d.lastEnd.Sub(start)
	for _, g := range b.groups {
		d.out.stats[g].dur += elapsed / time.Duration(len(b.groups))
	}
	if ret == nvml.SUCCESS {
		return
	}
	b.failed = true
	if fieldAbsent(ret) {
		// Not one of the fields could be read: the device has none of
		// them, which is not an error.
		return
	}
	// Report the failure once per group that asked.
	var reported groupSet
	for _, g := range b.groups {
		if !reported[g] {
			reported[g] = true
			d.ok(g, "GetFieldValues", ret)
		}
	}
}

// fieldAbsent says whether a field's (or the whole call's) return code
// means the reading does not exist here. Besides NOT_SUPPORTED, a field ID
// the loaded driver does not know answers INVALID_ARGUMENT (drivers before
// R570 for the PCIe byte counters, 197/198), as does a link number the
// device lacks. nvmlDeviceGetFieldValues succeeds only "if any values were
// populated": when none of the fields asked for exists, the call itself
// fails with such a code. The handle and the array are valid here, so the
// code can only be about the fields.
func fieldAbsent(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT
}

// callFieldValues calls GetFieldValues, turning a panic into an error
// return so that one broken binding cannot take the scrape down.
func (d *deviceReader) callFieldValues(values []nvml.FieldValue) (ret nvml.Return) {
	defer func() {
		if p := recover(); p != nil {
			ret = nvml.ERROR_UNKNOWN
		}
	}()
	return d.dev.GetFieldValues(values)
}

// field finds the answer to (id, scope) in the batch. ok is false when it
// was not asked for, the call failed, or NVML could not read this field
// (a field-level error other than NOT_SUPPORTED is filed under g).
func (d *deviceReader) field(g groupID, id, scope uint32) (nvml.FieldValue, bool) {
	b := &d.fields
	if b.failed {
		return nvml.FieldValue{}, false
	}
	for i := range b.values {
		v := &b.values[i]
		if v.FieldId == id && v.ScopeId == scope {
			ret := nvml.Return(v.NvmlReturn)
			if fieldAbsent(ret) {
				return nvml.FieldValue{}, false
			}
			return *v, d.ok(g, fieldCallName(id), ret)
		}
	}
	return nvml.FieldValue{}, false
}

func fieldCallName(id uint32) string {
	switch id {
	case nvml.FI_DEV_MEMORY_TEMP:
		return "GetFieldValues(FI_DEV_MEMORY_TEMP)"
	case nvml.FI_DEV_PCIE_COUNT_TX_BYTES:
		return "GetFieldValues(FI_DEV_PCIE_COUNT_TX_BYTES)"
	case nvml.FI_DEV_PCIE_COUNT_RX_BYTES:
		return "GetFieldValues(FI_DEV_PCIE_COUNT_RX_BYTES)"
	case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
		return "GetFieldValues(FI_DEV_NVLINK_THROUGHPUT_DATA_TX)"
	case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
		return "GetFieldValues(FI_DEV_NVLINK_THROUGHPUT_DATA_RX)"
	}
	return "GetFieldValues"
}

// fieldUint decodes a field value as an unsigned integer. ok is false for a
// negative or non-finite value, or an unknown value type.
func fieldUint(v nvml.FieldValue) (uint64, bool) {
	f, ok := fieldNumber(v)
	if ok && v.ValueType != uint32(nvml.VALUE_TYPE_DOUBLE) {
		// Integers up to 2^64 do not survive a float64 round trip; decode
		// them exactly.
		switch nvml.ValueType(v.ValueType) {
		case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
			return binary.LittleEndian.Uint64(v.Value[:]), true
		}
	}
	if !ok || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return uint64(f), true
}

// fieldNumber decodes a field value of any numeric type. NVML stores it in a
// little-endian union (all platforms NVML supports are little-endian).
func fieldNumber(v nvml.FieldValue) (float64, bool) {
	b := v.Value[:]
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(b)), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(b)), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(b))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(b))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(b)), true
	}
	return 0, false
}
