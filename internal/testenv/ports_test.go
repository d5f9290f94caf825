package testenv

import (
	"testing"
)

// Two reservations held at once never share a port, and every port lies
// outside the kernel's ephemeral range.
func TestFreePortReservesOutsideTheEphemeralRange(t *testing.T) {
	low, high := reservedPortRange()
	seen := make(map[int]bool)
	for range 200 {
		p := FreePort(t)
		if p < low || p > high {
			t.Fatalf("port %d outside %d-%d", p, low, high)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice while still reserved", p)
		}
		seen[p] = true
	}
}
