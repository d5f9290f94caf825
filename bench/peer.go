//go:build linux

package main

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// The side-by-side comparison with nvidia_gpu_exporter: the peer
// is built from its public source in a temporary directory (its Go modules
// come from the module proxy; nothing of it is kept), both binaries are
// copied into place, and each round drops the page cache and then measures
// gpuwatch's simulated dgx-h100 and the peer's demo backend with 8 GPUs, in
// alternating order.

// peerDemoConfig is the peer's demo backend set up like dgx-h100: 8 GPUs
// under load, the last in MIG mode (its own capture of an H200 with driver
// 590; the demo ships no H100 capture).
const peerDemoConfig = `capture: linux-x86_64__nvidia-h200__590.48.01
state: load
fluctuate: true
gpus: 8
extras:
  mig:
    - gpu: 7
      instances:
        - {gi: 2, profile: 3g.71gb, cis: 2, busy: true}
        - {gi: 7, profile: 1g.18gb}
`

// exporterRun is one exporter of the comparison.
type exporterRun struct {
	name    string
	bin     string
	command func(addr string) *exec.Cmd
}

// comparePeer builds the peer from source at ref, then measures gpuwatch
// (bin, already installed) and the peer side by side for the given rounds.
func comparePeer(bin, source, ref string, scrapes, rounds int) error {
	dir, err := os.MkdirTemp("", "gpuwatch-bench-peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	built, version, err := buildPeer(source, ref, dir)
	if err != nil {
		return fmt.Errorf("building nvidia_gpu_exporter from %s at %s: %w", source, ref, err)
	}
	peerBin, cleanup, err := installCopy(built)
	if err != nil {
		return err
	}
	defer cleanup()
	config := filepath.Join(dir, "demo.yaml")
	if err := os.WriteFile(config, []byte(peerDemoConfig), 0o644); err != nil {
		return err
	}
	exporters := []exporterRun{
		{name: "gpuwatch dgx-h100", bin: bin, command: func(addr string) *exec.Cmd {
			return exec.Command(bin, "--backend=sim", "--sim.profile=dgx-h100", "--web.listen-address="+addr, "--log.level=warn")
		}},
		{name: "nvidia_gpu_exporter " + version + " demo", bin: peerBin, command: func(addr string) *exec.Cmd {
			return exec.Command(peerBin, "--collect.backend=demo", "--demo-config="+config, "--collect.compute-apps",
				"--web.listen-address="+addr, "--log.level=warn")
		}},
	}

	dropped := true
	if err := dropPageCache(); err != nil {
		dropped = false
		fmt.Printf("The page cache could not be dropped (%v): file-backed RSS depends on what is cached.\n\n", err)
	}
	fmt.Println("| round | exporter | p50 ms | p99 ms | CPU s / 1000 scrapes | VmHWM MiB | RssAnon MiB | RssFile MiB | series | text MB |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	all := make([][]result, len(exporters))
	for round := range rounds {
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			e := exporters[i]
			if dropped {
				if err := dropPageCache(); err != nil {
					return err
				}
			}
			res, err := measureCommand(e.name, e.command, 1, scrapes)
			if err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
			all[i] = append(all[i], res)
			text, err := textBytes(e.bin)
			if err != nil {
				return err
			}
			fmt.Printf("| %d | %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f | %d | %.1f |\n", round+1, e.name,
				ms(res.p50), ms(res.p99), res.cpuPer1000, res.peakRSSMiB, res.anonMiB, res.fileMiB, res.series, float64(text)/1e6)
		}
	}
	fmt.Println()
	fmt.Printf("Medians of %d rounds, %d scrapes each, one scraper:\n\n", rounds, scrapes)
	fmt.Println("| exporter | p50 ms | p99 ms | CPU s / 1000 scrapes | VmHWM MiB | RssAnon MiB | RssFile MiB |")
	fmt.Println("|---|---|---|---|---|---|---|")
	medians := make([][6]float64, len(exporters))
	for i, e := range exporters {
		m := &medians[i]
		m[0] = median(all[i], func(r result) float64 { return ms(r.p50) })
		m[1] = median(all[i], func(r result) float64 { return ms(r.p99) })
		m[2] = median(all[i], func(r result) float64 { return r.cpuPer1000 })
		m[3] = median(all[i], func(r result) float64 { return r.peakRSSMiB })
		m[4] = median(all[i], func(r result) float64 { return r.anonMiB })
		m[5] = median(all[i], func(r result) float64 { return r.fileMiB })
		fmt.Printf("| %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f |\n", e.name, m[0], m[1], m[2], m[3], m[4], m[5])
	}
	fmt.Printf("| gpuwatch ÷ peer | %.2f× | %.2f× | %.2f× | %.2f× | %.2f× | %.2f× |\n",
		medians[0][0]/medians[1][0], medians[0][1]/medians[1][1], medians[0][2]/medians[1][2],
		medians[0][3]/medians[1][3], medians[0][4]/medians[1][4], medians[0][5]/medians[1][5])
	return nil
}

// buildPeer clones source (a git URL or a local repository) into dir,
// checks out ref and builds nvidia_gpu_exporter as its releases are built
// (static, CGO_ENABLED=0, -s -w). It returns the binary and git describe's
// name for ref.
func buildPeer(source, ref, dir string) (bin, version string, err error) {
	src := filepath.Join(dir, "src")
	run := func(dir string, env []string, name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := run(dir, nil, "git", "clone", "--quiet", source, src); err != nil {
		return "", "", err
	}
	if _, err := run(src, nil, "git", "checkout", "--quiet", ref); err != nil {
		return "", "", err
	}
	version, err = run(src, nil, "git", "describe", "--tags", "--always")
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "nvidia_gpu_exporter")
	_, err = run(src, []string{"CGO_ENABLED=0", "GOWORK=off"}, "go", "build", "-trimpath",
		"-ldflags=-s -w -X github.com/prometheus/common/version.Version="+version,
		"-o", bin, "./cmd/nvidia_gpu_exporter")
	return bin, version, err
}

// dropPageCache writes dirty pages back and drops the page cache (root
// only), so that each exporter's binary is read back cold, as after a boot.
func dropPageCache() error {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}

// textBytes is what size(1) calls text: every allocated, read-only section
// (code, read-only data, Go's type and line tables).
func textBytes(path string) (uint64, error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n uint64
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Flags&elf.SHF_WRITE == 0 && s.Type != elf.SHT_NOBITS {
			n += s.Size
		}
	}
	return n, nil
}

func median(rs []result, value func(result) float64) float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = value(r)
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}
