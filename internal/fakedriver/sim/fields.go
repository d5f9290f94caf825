//go:build cgo

package sim

import (
	"encoding/binary"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GetFieldValues answers NVML field queries the way the driver does: the
// call succeeds as a whole and each FieldValue carries its own NvmlReturn,
// ValueType and little-endian Value bytes. Fields a device lacks answer
// NOT_SUPPORTED; unknown field IDs INVALID_ARGUMENT. When no field could be
// read the call fails as a whole (nvml.h promises SUCCESS only "if any
// values were populated"), with the first field's code. On a lost GPU the
// call and every field answer GPU_IS_LOST.
func (d *device) GetFieldValues(values []nvml.FieldValue) nvml.Return {
	e, r := d.always()
	if r == nvml.ERROR_UNINITIALIZED {
		return r
	}
	ts := d.sim.epoch.Add(e).UnixMicro()
	t := seconds(e)
	populated, firstErr := false, nvml.SUCCESS
	for i := range values {
		v := &values[i]
		v.Timestamp = ts
		v.LatencyUsec = 0
		v.Value = [8]byte{}
		v.ValueType = 0
		if r == nvml.ERROR_GPU_IS_LOST {
			v.NvmlReturn = uint32(nvml.ERROR_GPU_IS_LOST)
			continue
		}
		if !d.sim.knowsField(v.FieldId) { // a field ID newer than the simulated driver
			v.NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
			continue
		}
		v.NvmlReturn = uint32(d.fieldValue(t, v))
		if v.NvmlReturn == uint32(nvml.SUCCESS) {
			populated = true
		} else if firstErr == nvml.SUCCESS {
			firstErr = nvml.Return(v.NvmlReturn)
		}
	}
	// nvml.h: SUCCESS "if any values in values were populated". When none
	// was, the call itself fails, with the first field's error.
	if r == nvml.SUCCESS && !populated && firstErr != nvml.SUCCESS {
		return firstErr
	}
	return r
}

// fieldValue fills one field and returns its NvmlReturn.
func (d *device) fieldValue(t float64, v *nvml.FieldValue) nvml.Return {
	if read, ok := fieldReaders[v.FieldId]; ok {
		return read(d, t, v)
	}
	if v.FieldId == 0 || v.FieldId >= nvml.FI_MAX {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return nvml.ERROR_NOT_SUPPORTED
}

// fieldReaders answer the field IDs the simulator models, each as the
// driver does for the card's features; any other valid ID is NOT_SUPPORTED.
var fieldReaders = map[uint32]func(d *device, t float64, v *nvml.FieldValue) nvml.Return{
	nvml.FI_DEV_MEMORY_TEMP:                       (*device).memoryTemperatureField,
	nvml.FI_DEV_PCIE_COUNT_TX_BYTES:               (*device).pcieBytesField,
	nvml.FI_DEV_PCIE_COUNT_RX_BYTES:               (*device).pcieBytesField,
	nvml.FI_DEV_PCIE_REPLAY_COUNTER:               (*device).pcieReplayField,
	nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION:          (*device).energyField,
	nvml.FI_DEV_POWER_INSTANT:                     (*device).instantPowerField,
	nvml.FI_DEV_NVLINK_LINK_COUNT:                 (*device).nvlinkCountField,
	nvml.FI_DEV_NVLINK_SPEED_MBPS_COMMON:          (*device).nvlinkSpeedField,
	nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:         (*device).nvlinkThroughputField,
	nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:         (*device).nvlinkThroughputField,
	nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_TX:          (*device).nvlinkThroughputField,
	nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_RX:          (*device).nvlinkThroughputField,
	nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY:            (*device).nvlinkLinkErrorsField,
	nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY:          (*device).nvlinkLinkErrorsField,
	nvml.FI_DEV_NVLINK_ERROR_DL_CRC:               (*device).nvlinkLinkErrorsField,
	nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL:   (*device).nvlinkTotalErrorsField,
	nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: (*device).nvlinkTotalErrorsField,
	nvml.FI_DEV_NVLINK_GET_STATE:                  (*device).nvlinkStateField,
}

func (d *device) memoryTemperatureField(t float64, v *nvml.FieldValue) nvml.Return {
	c, ok := d.memoryTemperature(t)
	if !ok {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return setUint(v, c)
}

func (d *device) pcieBytesField(t float64, v *nvml.FieldValue) nvml.Return {
	if !d.features.has(featPCIe) {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return setULL(v, d.pcieBytes(t, v.FieldId == nvml.FI_DEV_PCIE_COUNT_TX_BYTES))
}

func (d *device) pcieReplayField(t float64, v *nvml.FieldValue) nvml.Return {
	if !d.features.has(featPCIeReplay) {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return setULL(v, d.pcieReplays(t))
}

func (d *device) energyField(t float64, v *nvml.FieldValue) nvml.Return {
	if !d.features.has(featEnergy) {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return setULL(v, uint64(d.energyJ(t)*1000))
}

func (d *device) instantPowerField(t float64, v *nvml.FieldValue) nvml.Return {
	if !d.features.has(featPower) {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return setUint(v, uint32(math.Round(d.powerW(t)*1000)))
}

func (d *device) nvlinkCountField(_ float64, v *nvml.FieldValue) nvml.Return {
	if !d.features.has(featNVLink) {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return setUint(v, uint32(d.model.nvlinks))
}

func (d *device) nvlinkSpeedField(_ float64, v *nvml.FieldValue) nvml.Return {
	if !d.features.has(featNVLink) {
		return nvml.ERROR_NOT_SUPPORTED
	}
	if !d.nvlinkUp {
		return setUint(v, 0)
	}
	return setUint(v, 26562)
}

func (d *device) nvlinkThroughputField(t float64, v *nvml.FieldValue) nvml.Return {
	link := int(v.ScopeId)
	if r := d.checkLinkField(link); r != nvml.SUCCESS {
		return r
	}
	tx := v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX || v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_TX
	raw := v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_TX || v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_RX
	return setULL(v, d.nvlinkKiB(t, link, tx, raw))
}

func (d *device) nvlinkLinkErrorsField(t float64, v *nvml.FieldValue) nvml.Return {
	link := int(v.ScopeId)
	if r := d.checkLinkField(link); r != nvml.SUCCESS {
		return r
	}
	c := nvml.NVLINK_ERROR_DL_CRC_FLIT
	switch v.FieldId {
	case nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY:
		c = nvml.NVLINK_ERROR_DL_REPLAY
	case nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY:
		c = nvml.NVLINK_ERROR_DL_RECOVERY
	}
	return setULL(v, d.nvlinkErrors(t, link, c))
}

func (d *device) nvlinkTotalErrorsField(t float64, v *nvml.FieldValue) nvml.Return {
	if !d.features.has(featNVLink) {
		return nvml.ERROR_NOT_SUPPORTED
	}
	c := nvml.NVLINK_ERROR_DL_REPLAY
	if v.FieldId == nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL {
		c = nvml.NVLINK_ERROR_DL_RECOVERY
	}
	var sum uint64
	for l := range d.model.nvlinks {
		sum += d.nvlinkErrors(t, l, c)
	}
	return setULL(v, sum)
}

func (d *device) nvlinkStateField(_ float64, v *nvml.FieldValue) nvml.Return {
	if r := d.checkLinkField(int(v.ScopeId)); r != nvml.SUCCESS {
		return r
	}
	if d.nvlinkUp {
		return setUint(v, 1)
	}
	return setUint(v, 0)
}

// checkLinkField validates a per-link field's scope (the link number).
func (d *device) checkLinkField(link int) nvml.Return {
	if !d.features.has(featNVLink) {
		return nvml.ERROR_NOT_SUPPORTED
	}
	if link >= d.model.nvlinks {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return nvml.SUCCESS
}

func setUint(v *nvml.FieldValue, x uint32) nvml.Return {
	v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
	binary.LittleEndian.PutUint32(v.Value[:4], x)
	return nvml.SUCCESS
}

func setULL(v *nvml.FieldValue, x uint64) nvml.Return {
	v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
	binary.LittleEndian.PutUint64(v.Value[:], x)
	return nvml.SUCCESS
}
