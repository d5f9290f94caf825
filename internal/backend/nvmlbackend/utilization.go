//go:build cgo

package nvmlbackend

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// readUtilization reads the driver's utilization percentages as ratios.
func (d *deviceReader) readUtilization(u *snapshot.Utilization) {
	if d.can(callGetUtilizationRates) {
		if rates, ret := d.dev.GetUtilizationRates(); d.ok(gUtilization, "GetUtilizationRates", ret) {
			u.GPU = snapshot.Some(percent(rates.Gpu))
			u.Memory = snapshot.Some(percent(rates.Memory))
		}
	}
	if d.can(callGetEncoderUtilization) {
		if enc, _, ret := d.dev.GetEncoderUtilization(); d.ok(gUtilization, "GetEncoderUtilization", ret) {
			u.Encoder = snapshot.Some(percent(enc))
		}
	}
	if d.can(callGetDecoderUtilization) {
		if dec, _, ret := d.dev.GetDecoderUtilization(); d.ok(gUtilization, "GetDecoderUtilization", ret) {
			u.Decoder = snapshot.Some(percent(dec))
		}
	}
}

// percent turns NVML's integer percent into a 0–1 ratio.
func percent(p uint32) float64 { return float64(p) / 100 }
