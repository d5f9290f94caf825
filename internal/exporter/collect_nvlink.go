package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The NVLink collector: per link state, traffic and data-link errors. On an
// 18-link H100 this is the largest group, so it checks each metric's switch
// once per device rather than per link.
func init() {
	registerCollector(snapshot.GroupNVLink, collector{device: collectNVLink})
}

func collectNVLink(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	errorsOn := em.on(mNVLinkErrors)
	for i := range d.NVLinks {
		l := &d.NVLinks[i]
		link := itoa(l.Link)
		em.dev1(mNVLinkUp, bool01(l.Active), link)
		devOpt1(em, mNVLinkTx, l.TxBytes, link)
		devOpt1(em, mNVLinkRx, l.RxBytes, link)
		if errorsOn {
			devOpt2(em, mNVLinkErrors, l.CRCFlitErrors, link, "crc_flit")
			devOpt2(em, mNVLinkErrors, l.CRCDataErrors, link, "crc_data")
			devOpt2(em, mNVLinkErrors, l.ReplayErrors, link, "replay")
			devOpt2(em, mNVLinkErrors, l.RecoveryErrors, link, "recovery")
		}
	}
}
