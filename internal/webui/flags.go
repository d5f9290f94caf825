package webui

import (
	"fmt"
	"time"
)

// CheckFlags refuses an interval or history length that makes no sense.
func CheckFlags(interval, history time.Duration) error {
	switch {
	case interval <= 0:
		return fmt.Errorf("--ui.interval=%s: must be positive", interval)
	case interval < 100*time.Millisecond:
		return fmt.Errorf("--ui.interval=%s: must be at least 100ms", interval)
	case history < interval:
		return fmt.Errorf("--ui.history=%s: must be at least --ui.interval (%s)", history, interval)
	case history/interval > maxSamples:
		return fmt.Errorf("--ui.history=%s at --ui.interval=%s is %d samples per GPU; at most %d", history, interval, history/interval, maxSamples)
	}
	return nil
}

// maxSamples bounds the history per GPU: 1 day at 1 s (its memory:
// bench/RESULTS.md, "Live page history at the maximum setting").
const maxSamples = 86400
