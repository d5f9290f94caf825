package pidindex

import (
	"math/rand/v2"
	"testing"
)

// Index answers as a plain map would, whatever the order of the lookups
// and whatever changed between passes: random passes over a small PID
// space (so that positions, PIDs and values collide often), checked
// against a map.
func TestIndexAnswersAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var x Index
	want := map[uint32]int32{}
	for pass := range 5000 {
		n := rng.IntN(12)
		for pos := range n {
			pid := uint32(rng.IntN(10)) // PID 0 too: the memo's zero entries must not match it
			switch op := rng.IntN(10); {
			case op < 6:
				got, ok := x.Get(pos, pid)
				w, wok := want[pid]
				if ok != wok || got != w {
					t.Fatalf("pass %d: Get(%d, %d) = %d, %v; want %d, %v", pass, pos, pid, got, ok, w, wok)
				}
			case op < 9:
				v := int32(rng.IntN(4))
				x.Set(pos-rng.IntN(2), pid, v)
				want[pid] = v
			default:
				if rng.IntN(4) == 0 {
					x.Clear()
					clear(want)
				} else {
					x.DeleteFunc(func(p uint32, _ int32) bool { return p == pid })
					delete(want, pid)
				}
			}
		}
		if x.Len() != len(want) {
			t.Fatalf("pass %d: Len %d, want %d", pass, x.Len(), len(want))
		}
	}
}

// A pass in the order of the one before is answered from the memo: no map
// lookup (the map is emptied behind the Index's back to show it).
func TestIndexSameOrderSkipsTheMap(t *testing.T) {
	var x Index
	pids := []uint32{40, 7, 0, 99}
	for pos, pid := range pids {
		x.Set(pos, pid, int32(pos*10))
	}
	clear(x.m)
	for pos, pid := range pids {
		if v, ok := x.Get(pos, pid); !ok || v != int32(pos*10) {
			t.Errorf("Get(%d, %d) = %d, %v; want %d from the memo", pos, pid, v, ok, pos*10)
		}
	}
	if _, ok := x.Get(0, 7); ok {
		t.Error("Get(0, 7): answered from another position's memo")
	}
}

// The generation wraps without old memo entries matching again.
func TestIndexGenerationWraps(t *testing.T) {
	var x Index
	x.Set(0, 5, 1)
	x.gen = ^uint32(0)
	x.memo[0].gen = 1 // as left by an early generation
	x.Clear()
	if x.gen == 0 {
		t.Fatal("generation 0 after wrapping")
	}
	if _, ok := x.Get(0, 5); ok {
		t.Error("a memo entry of before the wrap matched")
	}
}

func BenchmarkGet(b *testing.B) {
	var x Index
	for pos := range 256 {
		x.Set(pos, uint32(200000+pos), int32(pos))
	}
	b.Run("same-order", func(b *testing.B) {
		for b.Loop() {
			for pos := range 256 {
				x.Get(pos, uint32(200000+pos))
			}
		}
	})
	// Each pass in the other order from the one before: every lookup
	// misses the memo, as a plain map lookup and a memo write.
	b.Run("order-changes", func(b *testing.B) {
		reverse := 0
		for b.Loop() {
			reverse ^= 1
			for pos := range 256 {
				x.Get(pos, uint32(200000+pos+reverse*(255-2*pos)))
			}
		}
	})
}
