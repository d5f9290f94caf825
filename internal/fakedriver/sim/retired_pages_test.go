//go:build cgo

package sim

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestRetiredPagesSizedAnswersLikeTheCFunction(t *testing.T) {
	cause := nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
	healthy := handle(t, newSim(t, Config{Profile: "v100"}), 0).(sizedRetiredPages)
	// The count query (capacity 0) of a GPU with no retired page.
	if pages, n, r := healthy.RetiredPagesSized(cause, 0); r != nvml.SUCCESS || n != 0 || len(pages) != 0 {
		t.Errorf("count query: %v pages, count %d, %v; want none, SUCCESS", pages, n, r)
	}
	if _, _, r := healthy.RetiredPagesSized(nvml.PAGE_RETIREMENT_CAUSE_COUNT, 0); r != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("an unknown cause answers %v, want INVALID_ARGUMENT", r)
	}
	h100 := handle(t, newSim(t, Config{Profile: "h100"}), 0).(sizedRetiredPages)
	if _, _, r := h100.RetiredPagesSized(cause, 0); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("H100 (row remapping) answers %v, want NOT_SUPPORTED", r)
	}

	for _, c := range []struct {
		size string
		asks func(capacity uint32) uint32
	}{
		{RetiredPagesDoubling, func(capacity uint32) uint32 { return 2 * max(capacity, 1) }},
		{RetiredPagesOneMore, func(capacity uint32) uint32 { return capacity + 1 }},
	} {
		t.Run(c.size, func(t *testing.T) {
			s := newSim(t, Config{Profile: "v100", Faults: []Fault{{GPU: 0, RetiredPagesSize: c.size}}})
			d := handle(t, s, 0)
			for _, capacity := range []uint32{0, 1, 10, 4096} {
				pages, n, r := d.(sizedRetiredPages).RetiredPagesSized(cause, capacity)
				if r != nvml.ERROR_INSUFFICIENT_SIZE || n != c.asks(capacity) || pages != nil {
					t.Errorf("offered %d: %v pages, count %d, %v; want INSUFFICIENT_SIZE asking for %d", capacity, pages, n, r, c.asks(capacity))
				}
			}
			// go-nvml's form ends where a bounded caller ends.
			if _, r := d.GetRetiredPages(cause); r != nvml.ERROR_INSUFFICIENT_SIZE {
				t.Errorf("GetRetiredPages: %v, want INSUFFICIENT_SIZE", r)
			}
			if _, _, r := d.GetRetiredPages_v2(cause); r != nvml.ERROR_INSUFFICIENT_SIZE {
				t.Errorf("GetRetiredPages_v2: %v, want INSUFFICIENT_SIZE", r)
			}
			// The rest of the GPU's ECC answers.
			if _, r := d.GetRetiredPagesPendingStatus(); r != nvml.SUCCESS {
				t.Errorf("GetRetiredPagesPendingStatus: %v", r)
			}
		})
	}
}
