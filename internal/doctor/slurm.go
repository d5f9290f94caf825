package doctor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// checkSlurm: the commands, the controller, this node's name, and the
// gres.conf order against NVML's.
func checkSlurm(env Env) []Result {
	s := env.Slurm
	if env.NotStarted {
		return []Result{skip("slurm", notStarted)}
	}
	if s == nil {
		return []Result{skip("slurm", "Slurm job attribution is off (--slurm.jobs=false, or auto without scontrol on PATH)")}
	}
	if _, demo := s.Runner.(interface{ Demo() }); !demo {
		for _, cmd := range []string{s.Scontrol, s.Squeue} {
			if _, err := exec.LookPath(cmd); err != nil {
				return []Result{fail("slurm commands", err.Error(), "install the Slurm client commands, or set --slurm.scontrol-path and --slurm.squeue-path", true)}
			}
		}
	}
	out := []Result{ok("slurm commands", s.Scontrol+" and "+s.Squeue+" found")}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), env.Timeout)
		defer cancel()
		b, err := s.Runner.Run(ctx, s.Scontrol, args...)
		return strings.TrimSpace(string(b)), err
	}
	ping, err := run("ping")
	if err != nil || !strings.Contains(ping, "is UP") {
		found := ping
		if err != nil {
			found = err.Error()
		}
		return append(out, fail("slurm controller", found, "check slurmctld and munge on the controller and SLURM_CONF here", true))
	}
	out = append(out, ok("slurm controller", firstLine(ping)))

	node, err := run("show", "node", "-o", s.Node)
	if err != nil || !strings.HasPrefix(node, "NodeName="+s.Node+" ") {
		found := "Slurm does not know node " + s.Node
		if err != nil {
			found += ": " + err.Error()
		}
		return append(out, fail("slurm node", found, "set --slurm.node-name to this node's NodeName in slurm.conf", true))
	}
	out = append(out, ok("slurm node", "Slurm knows this node as "+s.Node))
	return append(out, checkGresOrder(env, run))
}

// checkGresOrder compares the order of this node's GPU device files in
// gres.conf (Slurm's GPU index order) with NVML's index order (minor
// numbers): where they differ, gpu_slurm_job_info names the wrong GPU.
func checkGresOrder(env Env, run func(args ...string) (string, error)) Result {
	const check = "gres.conf order"
	path := env.Slurm.GresConf
	if path == "" {
		conf, err := run("show", "config")
		if err != nil {
			return skip(check, "cannot read Slurm's configuration: "+err.Error())
		}
		m := regexp.MustCompile(`(?m)^SLURM_CONF\s*=\s*(\S+)`).FindStringSubmatch(conf)
		if m == nil {
			return skip(check, "scontrol show config names no SLURM_CONF")
		}
		path = filepath.Join(filepath.Dir(m[1]), "gres.conf")
	}
	files, autodetect, err := gresFiles(path, env.Slurm.Node)
	switch {
	case err != nil:
		return skip(check, err.Error())
	case autodetect:
		return ok(check, path+": AutoDetect=nvml, so Slurm numbers GPUs as NVML does")
	case len(files) == 0:
		return skip(check, path+" lists no GPU files for "+env.Slurm.Node)
	}
	var minors []int
	for _, f := range files {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(f), "nvidia"))
		if err != nil || !strings.HasPrefix(filepath.Base(f), "nvidia") || filepath.Dir(f) != "/dev" {
			return skip(check, fmt.Sprintf("%s: %s is not a /dev/nvidiaN device file; cannot compare", path, f))
		}
		minors = append(minors, n)
	}
	if env.Snapshot == nil {
		return skip(check, "no GPU reading to compare with")
	}
	var nvmlMinors []int
	for _, d := range env.Snapshot.Devices {
		if m, known := d.Info.MinorNumber.Get(); known {
			nvmlMinors = append(nvmlMinors, m)
		}
	}
	if len(minors) > len(nvmlMinors) {
		return fail(check, fmt.Sprintf("%s lists %d GPUs for %s, NVML sees %d", path, len(minors), env.Slurm.Node, len(nvmlMinors)),
			"make gres.conf list the GPUs this node has (or use AutoDetect=nvml)", true)
	}
	if fmt.Sprint(minors) != fmt.Sprint(nvmlMinors[:len(minors)]) {
		return fail(check, fmt.Sprintf("%s lists /dev/nvidia%v, NVML's index order is /dev/nvidia%v", path, minors, nvmlMinors),
			"list the GPUs in gres.conf in /dev/nvidia0..N order (or use AutoDetect=nvml): Slurm's GPU index then is NVML's", true)
	}
	return ok(check, fmt.Sprintf("%s lists the GPUs in NVML's order (/dev/nvidia%v)", path, minors))
}

// gresFiles reads the GPU device files gres.conf gives node, in order.
func gresFiles(path, node string) (files []string, autodetect bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		kv := map[string]string{}
		for field := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(field, "=")
			kv[strings.ToLower(k)] = v
		}
		if strings.EqualFold(kv["autodetect"], "nvml") {
			autodetect = true
		}
		if n := kv["nodename"]; n != "" {
			nodes, err := slurm.ExpandHostlist(n)
			if err != nil || !contains(nodes, node) {
				continue
			}
		}
		if !strings.EqualFold(kv["name"], "gpu") || kv["file"] == "" {
			continue
		}
		expanded, err := slurm.ExpandHostlist(kv["file"])
		if err != nil {
			return nil, false, fmt.Errorf("%s: File=%s: %w", path, kv["file"], err)
		}
		files = append(files, expanded...)
	}
	return files, autodetect, sc.Err()
}

func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
