//go:build cgo

package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Retired pages are counted, never listed: gpuwatch exports how many pages
// each cause retired (gpu_retired_pages{cause}), not their addresses.
// nvml.h documents nvmlDeviceGetRetiredPages with *pageCount = 0 as the
// query of the count ("Set to 0 to query the size without allocating an
// addresses buffer"): SUCCESS when no page is retired, else
// ERROR_INSUFFICIENT_SIZE with the count. go-nvml's GetRetiredPages (and
// _v2) instead list the addresses, doubling the buffer for as long as the
// driver answers INSUFFICIENT_SIZE, with no bound: a driver whose count
// keeps growing runs gpuwatch out of memory or spins a core.
//
// So the count is read through boundedExchange: the first call offers no
// buffer and is the query; on a GPU with no retired page (nearly every
// one) it is the only call. A count above 0 is then confirmed by offering
// a buffer that holds it: a driver that will not fill the buffer it asked
// for, after retiredPageTries calls, has no count worth exporting, and
// the count is unknown (an ecc group error), not whatever it said last.
// As with process lists, go-nvml's own handles are called through the C
// function (retired_pages_cgo.go), the simulator's through its sized
// form, and only other handles (mocks, test wrappers) through go-nvml.

const (
	// retiredPageTries bounds the calls per cause per read: the query,
	// and three buffers sized to what the driver asked for, which covers
	// a page retired between two calls.
	retiredPageTries = 4
	// maxRetiredPages bounds the buffer (one address a page). A GPU
	// retires pages one failing address at a time and is replaced long
	// before it has retired a few dozen; no real count comes near.
	maxRetiredPages = 4096
)

// retiredPageBounds bound one cause's exchange.
var retiredPageBounds = exchangeBounds{tries: retiredPageTries, floor: 0, limit: maxRetiredPages}

// sizedRetiredPageLister answers one call of nvmlDeviceGetRetiredPages:
// offered capacity entries, the addresses when they fit, or
// ERROR_INSUFFICIENT_SIZE and the count the driver asks for. The
// simulator's device handles are sizedRetiredPageListers
// (sim.RetiredPagesSized).
type sizedRetiredPageLister interface {
	RetiredPagesSized(cause nvml.PageRetirementCause, capacity uint32) ([]uint64, uint32, nvml.Return)
}

// retiredPagesCall is one call of nvmlDeviceGetRetiredPages with a buffer
// of capacity entries.
type retiredPagesCall func(capacity uint32) ([]uint64, uint32, nvml.Return)

// countRetiredPages counts dev's pages retired for cause. tooLong is set
// when the driver answered INSUFFICIENT_SIZE to every try.
func countRetiredPages(dev nvml.Device, cause nvml.PageRetirementCause) (count uint64, ret nvml.Return, tooLong *listTooLong) {
	var call retiredPagesCall
	switch h := dev.(type) {
	case sizedRetiredPageLister:
		call = func(capacity uint32) ([]uint64, uint32, nvml.Return) {
			return h.RetiredPagesSized(cause, capacity)
		}
	default:
		if c, ok := cRetiredPages(dev, cause); ok {
			call = c
		} else {
			pages, ret := dev.GetRetiredPages(cause)
			return uint64(len(pages)), ret, nil
		}
	}
	pages, _, ret, tooLong := boundedExchange(retiredPageBounds, 0, call)
	// The pages that fit are the count: a driver that answers SUCCESS
	// with a count beyond the buffer it was offered did not fill them.
	return uint64(len(pages)), ret, tooLong
}
