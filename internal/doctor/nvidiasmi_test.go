package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// smiRow prints what nvidia-smi would for d, from gpuwatch's own reading
// (so the two agree), with overrides by query name.
func smiRow(d *snapshot.Device, override map[string]string) string {
	cols := []string{d.UUID}
	for _, f := range smiFields {
		v, ok := f.ours(d)
		s := "[N/A]"
		if ok {
			s = fmt.Sprintf("%.2f", v)
			if f.query == "pstate" {
				s = fmt.Sprintf("P%d", int(v))
			}
		}
		if o, found := override[f.query]; found {
			s = o
		}
		cols = append(cols, s)
	}
	return strings.Join(cols, ", ")
}

// fakeNvidiaSMI writes an executable that prints out, and checks that it is
// asked for the fields the doctor compares.
func fakeNvidiaSMI(t *testing.T, out string) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "out.csv")
	if err := os.WriteFile(data, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "nvidia-smi")
	body := "#!/bin/sh\ncase \"$1\" in --query-gpu=uuid,temperature.gpu,*) ;; *) echo \"unexpected $1\" >&2; exit 2;; esac\n" +
		"[ \"$2\" = --format=csv,noheader,nounits ] || exit 3\nexec cat " + data + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func TestNvidiaSMIComparison(t *testing.T) {
	env := baseEnv(t)
	env.Snapshot = simSnapshot(t, "dgx-h100")
	var agree, disagree []string
	for i := range env.Snapshot.Devices {
		d := &env.Snapshot.Devices[i]
		agree = append(agree, smiRow(d, map[string]string{"utilization.memory": "[Not Supported]"}))
		o := map[string]string{}
		if i == 2 {
			got, _ := d.Temperature.GPU.Get()
			o["temperature.gpu"] = fmt.Sprint(got + 9)
		}
		disagree = append(disagree, smiRow(d, o))
	}

	env.NvidiaSMI = fakeNvidiaSMI(t, strings.Join(agree, "\n")+"\n")
	r := Run(env)
	if !r.Healthy {
		t.Errorf("agreeing nvidia-smi: %+v", r.Results)
	}
	res := find(t, r, "nvidia-smi GPU 0")
	if res.Status != OK || !strings.Contains(res.Found, "temperature.gpu") || !strings.Contains(res.Found, "power.draw") ||
		strings.Contains(res.Found, "utilization.memory") {
		t.Errorf("GPU 0 = %+v", res)
	}

	env.NvidiaSMI = fakeNvidiaSMI(t, strings.Join(disagree, "\n")+"\n")
	r = Run(env)
	res = find(t, r, "nvidia-smi GPU 2")
	if res.Status != Fail || !res.Needed || !strings.Contains(res.Found, "temperature.gpu gpuwatch") || !strings.Contains(res.Found, "(tolerance 3 °C)") {
		t.Errorf("GPU 2 = %+v", res)
	}
	if find(t, r, "nvidia-smi GPU 1").Status != OK || r.Healthy {
		t.Errorf("one disagreement: %+v", r.Results)
	}

	// A GPU nvidia-smi does not list, and an nvidia-smi that fails.
	env.NvidiaSMI = fakeNvidiaSMI(t, strings.Join(agree[1:], "\n")+"\n")
	if res := find(t, Run(env), "nvidia-smi GPU 0"); res.Status != Fail || !strings.Contains(res.Found, "does not list") {
		t.Errorf("unlisted GPU = %+v", res)
	}
	env.NvidiaSMI = filepath.Join(t.TempDir(), "nonexistent")
	if res := find(t, Run(env), "nvidia-smi"); res.Status != Fail || res.Needed {
		t.Errorf("failing nvidia-smi = %+v", res)
	}
}
