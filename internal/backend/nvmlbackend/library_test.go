//go:build cgo

package nvmlbackend

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestRealLibrary runs the reader on the real libnvidia-ml.so.1. Without a
// driver (CI, this repository's build machines) it checks the error the
// integrator turns into the one-line "no NVIDIA driver" message; on a GPU
// machine it checks that every GPU reads as up, with its identity.
func TestRealLibrary(t *testing.T) {
	r, err := New(nvml.New(), Options{Groups: AllGroups()})
	if err != nil {
		if !errors.Is(err, ErrLibraryNotFound) {
			t.Fatalf("New on a machine without a usable driver: %v (want ErrLibraryNotFound, or a GPU)", err)
		}
		if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "libnvidia-ml.so.1") {
			t.Errorf("error %q: want one line naming libnvidia-ml.so.1", err)
		}
		return
	}
	defer r.Close()
	snap, err := r.Read(context.Background())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if snap.DriverVersion == "" || len(snap.Devices) == 0 {
		t.Fatalf("driver %q, %d devices", snap.DriverVersion, len(snap.Devices))
	}
	for _, d := range snap.Devices {
		if !d.Up || d.UUID == "" || d.Info.Name == "" || !d.Memory.Total.Valid {
			t.Errorf("gpu %d: up=%v uuid=%q name=%q memory=%+v reason=%q", d.Index, d.Up, d.UUID, d.Info.Name, d.Memory.Total, d.DownReason)
		}
		t.Logf("gpu %d: %s %s, %.0f W, gpm sm %v", d.Index, d.Info.Name, d.UUID, d.Power.Usage.Value, d.GPM.SMActive)
	}
	for name, st := range snap.Groups {
		t.Logf("group %-12s %8v err=%v", name, st.Duration, st.Err)
	}
}
