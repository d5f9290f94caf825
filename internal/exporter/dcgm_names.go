package exporter

import "slices"

// The dcgm-exporter names a dashboard or rules file may use, by the
// versions of --compat.dcgm-version that serve them, for `gpuwatch doctor
// --compat.check-file`.

// The driver-version label of each generation: a label, not a metric, but
// a name queries use (and one 4.9 renames).
var dcgmDriverLabels = map[string][]string{
	"DCGM_FI_DRIVER_VERSION":        {"4.8"},
	"DCGM_FI_SYSTEM_DRIVER_VERSION": {"4.9", "4.10"},
}

// DCGMNameVersions returns the --compat.dcgm-version values under which
// --compat=dcgm serves name (a metric, or the driver-version label), in
// order; nil for a name no version serves.
func DCGMNameVersions(name string) []string {
	if v, ok := dcgmDriverLabels[name]; ok {
		return v
	}
	var out []string
	for _, m := range catalog {
		if m.Name != name {
			continue
		}
		switch m.Compat {
		case compatDCGM:
			out = append(out, DCGM48.String())
		case compatDCGM49:
			out = append(out, m.DCGMVersions...)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		va, _ := ParseDCGMVersion(a)
		vb, _ := ParseDCGMVersion(b)
		return int(va) - int(vb)
	})
	return slices.Compact(out)
}

// DCGMNameIn returns the name under which version v serves the reading
// that another version serves as name: name itself when v serves it, else
// its counterpart in v's generation, or "" when v has none.
func DCGMNameIn(name string, v DCGMVersion) string {
	if slices.Contains(DCGMNameVersions(name), v.String()) {
		return name
	}
	for label, versions := range dcgmDriverLabels {
		if _, ok := dcgmDriverLabels[name]; ok && slices.Contains(versions, v.String()) {
			return label
		}
	}
	want := dcgmGenOf(v).fields()
	for _, g := range []*dcgmGen{&dcgmGen48, &dcgmGen49, &dcgmGen410} {
		for i, m := range g.fields() {
			if m != nil && m.Name == name && want[i] != nil {
				return want[i].Name
			}
		}
	}
	return ""
}

// fields lists g's metrics in a fixed order, so that the same position in
// two generations is the same reading.
func (g *dcgmGen) fields() []*metricDef {
	return []*metricDef{
		g.gpuTemp, g.memoryTemp, g.slowdownTemp, g.shutdownTemp,
		g.powerUsage, g.powerLimit, g.enforcedLimit, g.energy,
		g.smClock, g.memClock, g.throttleReasons,
		g.gpuUtil, g.memCopyUtil, g.encUtil, g.decUtil, g.fanSpeed,
		g.fbTotal, g.fbFree, g.fbUsed, g.fbReserved,
		g.xid, g.vgpuLicense,
		g.pcieReplay, g.pcieLinkGen, g.pcieLinkWidth,
		g.eccSBEVol, g.eccDBEVol, g.eccSBEAgg, g.eccDBEAgg,
		g.retiredSBE, g.retiredDBE, g.retiredPending,
		g.remapCorrectable, g.remapUncorrectable, g.remapFailure, g.remapPending,
		g.nvlinkCRCFlit, g.nvlinkCRCData, g.nvlinkReplay, g.nvlinkRecovery, g.nvlinkBandwidth,
		g.profGREngine, g.profSMActive, g.profSMOccupancy,
		g.profTensor, g.profDRAM, g.profFP64, g.profFP32, g.profFP16,
		g.profPCIeTx, g.profPCIeRx, g.profNVLinkTx, g.profNVLinkRx,
	}
}
