//go:build cgo

package sim

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The memory summed once at placement (processes that live throughout)
// answers as scanning every process does: per GPU and per MIG instance.
func TestUsedMemorySummedOnceAnswersAsAScan(t *testing.T) {
	var procs []ProcessSpec
	for i := range 16 {
		procs = append(procs, ProcessSpec{GPU: 6 + i%2, PID: uint32(1000 + i), UsedMemoryBytes: uint64(i+1) << 20, SMUtilization: 0.1,
			GPUInstance: map[bool]*int{true: new([4]int{1, 1, 5, 13}[i%4])}[i%2 == 1]})
	}
	s := newSim(t, Config{Profile: "dgx-h100", Processes: procs, PinTime: pinAt(3 * time.Second)})
	read := func() (used []uint64) {
		for _, d := range s.devices {
			m, r := d.GetMemoryInfo_v2()
			if r != nvml.SUCCESS {
				continue // a MIG GPU's memory is its instances'
			}
			used = append(used, m.Used)
			for _, md := range d.migDevices {
				mm, r := md.GetMemoryInfo_v2()
				if r != nvml.SUCCESS {
					t.Fatalf("MIG device %s: GetMemoryInfo_v2: %v", md.uuid, r)
				}
				used = append(used, mm.Used)
			}
		}
		return used
	}
	summed := read()
	if s.devices[7].processesUsed == nil {
		t.Fatal("processes that live throughout: memory not summed at placement")
	}
	for _, d := range s.devices {
		d.processesUsed = nil
	}
	scanned := read()
	if len(summed) != len(scanned) {
		t.Fatalf("summed %v, scanned %v", summed, scanned)
	}
	for i := range summed {
		if summed[i] != scanned[i] {
			t.Errorf("read %d: summed once %d, scanned %d", i, summed[i], scanned[i])
		}
	}
	// GPU 6 holds the even PIDs: 1+3+...+15 MiB.
	if got := s.devices[6].allocatedBytes(0); got != 64<<20 {
		t.Errorf("GPU 6's processes hold %d bytes, want %d", got, 64<<20)
	}
}

// A process with a life of its own is not summed at placement: its
// memory comes and goes with it.
func TestUsedMemoryOfProcessesWithALifeIsScanned(t *testing.T) {
	start, end := Duration(10*time.Second), Duration(20*time.Second)
	s := newSim(t, Config{Profile: "h100", PinTime: pinAt(0), Processes: []ProcessSpec{
		{GPU: 0, PID: 1, UsedMemoryBytes: 1 << 30, SMUtilization: 0.5},
		{GPU: 0, PID: 2, UsedMemoryBytes: 2 << 30, SMUtilization: 0.5, Start: &start, End: &end},
	}})
	d := s.devices[0]
	if d.processesUsed != nil {
		t.Fatal("memory summed at placement although a process starts and ends")
	}
	for _, c := range []struct {
		at   time.Duration
		want uint64
	}{{5 * time.Second, 1 << 30}, {15 * time.Second, 3 << 30}, {25 * time.Second, 1 << 30}} {
		if got := d.allocatedBytes(c.at); got != c.want {
			t.Errorf("at %v: %d bytes held, want %d", c.at, got, c.want)
		}
	}
}
