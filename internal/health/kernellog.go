package health

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// KernelXID is one `NVRM: Xid` line of the kernel log.
type KernelXID struct {
	// Bus is the GPU's PCI address as the line names it, normalised by
	// PCIKey ("0000:3b:00").
	Bus  string
	Code uint64
	// Time is when the kernel logged it; zero when the line's prefix
	// does not say (then it counts as logged before gpuwatch started).
	Time time.Time
}

// maxKernelLogLines bounds one parse: a kernel ring buffer holds far fewer.
const maxKernelLogLines = 1 << 20

// The line the driver logs for an XID, in every format seen: with or
// without "PCI:" (drivers before about R375 omit it), with or without
// pid= and name= after the code. The address has no PCI function.
var xidLine = regexp.MustCompile(`NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): ([0-9]{1,4})(?:,|$| )`)

// The prefixes a kernel log line can carry, each with its time:
// /dev/kmsg's "PRIO,SEQ,USEC,FLAGS;" (microseconds since boot), dmesg's
// "[SECONDS.MICROS]" (since boot), and journalctl -o short-iso's
// "2026-12-02T12:03:04+0000 HOST kernel:" (or +00:00, or with micro-
// seconds: -o short-iso-precise).
var (
	kmsgPrefix  = regexp.MustCompile(`^[0-9]+,[0-9]+,([0-9]+),[^;]*;`)
	dmesgPrefix = regexp.MustCompile(`^\[\s*([0-9]+)\.([0-9]{1,9})\]`)
	isoPrefix   = regexp.MustCompile(`^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(?:Z|[+-][0-9]{2}:?[0-9]{2})) `)
)

// ParseKernelLog reads kernel log lines (from /dev/kmsg, dmesg or
// journalctl -k -o short-iso) and returns their XIDs. boot is when the
// machine booted, for the prefixes that count from it (zero: those lines'
// times are left zero). A line that names an XID but cannot be read is a
// warning, never a guessed XID.
func ParseKernelLog(r io.Reader, boot time.Time) (xids []KernelXID, warnings []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		if n > maxKernelLogLines {
			warnings = append(warnings, fmt.Sprintf("kernel log: more than %d lines; the rest is not read", maxKernelLogLines))
			break
		}
		line := sc.Text()
		at := strings.Index(line, "NVRM: Xid")
		if at < 0 {
			continue
		}
		m := xidLine.FindStringSubmatch(line[at:])
		if m == nil {
			warnings = append(warnings, fmt.Sprintf("kernel log line %d: an NVRM: Xid line gpuwatch cannot read: %q", n, oneLine(truncate(line, 200))))
			continue
		}
		code, err := strconv.ParseUint(m[2], 10, 64)
		bus, ok := PCIKey(m[1])
		if err != nil || code == 0 || !ok {
			warnings = append(warnings, fmt.Sprintf("kernel log line %d: an NVRM: Xid line gpuwatch cannot read: %q", n, oneLine(truncate(line, 200))))
			continue
		}
		xids = append(xids, KernelXID{Bus: bus, Code: code, Time: lineTime(line, boot)})
	}
	if err := sc.Err(); err != nil {
		warnings = append(warnings, fmt.Sprintf("kernel log: %v", err))
	}
	return xids, warnings
}

// lineTime is the time a line's prefix gives, or zero.
func lineTime(line string, boot time.Time) time.Time {
	if m := kmsgPrefix.FindStringSubmatch(line); m != nil {
		if us, err := strconv.ParseInt(m[1], 10, 64); err == nil && !boot.IsZero() {
			return boot.Add(time.Duration(us) * time.Microsecond)
		}
		return time.Time{}
	}
	if m := dmesgPrefix.FindStringSubmatch(line); m != nil {
		sec, err1 := strconv.ParseInt(m[1], 10, 64)
		frac, err2 := strconv.ParseInt((m[2] + "000000000")[:9], 10, 64)
		if err1 == nil && err2 == nil && !boot.IsZero() {
			return boot.Add(time.Duration(sec)*time.Second + time.Duration(frac))
		}
		return time.Time{}
	}
	if m := isoPrefix.FindStringSubmatch(line); m != nil {
		for _, layout := range []string{"2006-01-02T15:04:05.999999999Z0700", "2006-01-02T15:04:05.999999999Z07:00"} {
			if t, err := time.Parse(layout, m[1]); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// PCIKey normalises a PCI address to "dddd:bb:dd" in lower case, the form
// both the kernel log ("0000:3b:00", "PCI:0000:3b:00") and NVML
// ("00000000:3B:00.0") reduce to; the function is dropped (the driver's
// XID line has none).
func PCIKey(addr string) (string, bool) {
	addr = strings.TrimPrefix(addr, "PCI:")
	if i := strings.IndexByte(addr, '.'); i >= 0 {
		addr = addr[:i]
	}
	parts := strings.Split(addr, ":")
	if len(parts) != 3 {
		return "", false
	}
	var v [3]uint64
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 16, 32)
		if err != nil || p == "" {
			return "", false
		}
		v[i] = n
	}
	if v[1] > 0xff || v[2] > 0x1f {
		return "", false
	}
	return fmt.Sprintf("%04x:%02x:%02x", v[0], v[1], v[2]), true
}

// RecordKernelXIDs adds the kernel log's XIDs logged before start (or
// with no time) to the history of the GPU at each one's PCI address in
// s. It returns warnings for the XIDs of an address s has no GPU at.
func (j *Judge) RecordKernelXIDs(s *snapshot.Snapshot, xids []KernelXID, start time.Time) (recorded int, warnings []string) {
	byBus := map[string]*snapshot.Device{}
	for i := range s.Devices {
		if k, ok := PCIKey(s.Devices[i].Info.PCIBusID); ok {
			byBus[k] = &s.Devices[i]
		}
	}
	unmatched := map[string]int{}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, x := range xids {
		if !x.Time.IsZero() && !x.Time.Before(start) {
			// The run's own XID watcher counts these.
			continue
		}
		d := byBus[x.Bus]
		if d == nil {
			unmatched[x.Bus]++
			continue
		}
		at := x.Time
		if at.IsZero() {
			at = start
		}
		j.recordXID(gpuKey(d), x.Code, at)
		recorded++
	}
	for _, bus := range slices.Sorted(maps.Keys(unmatched)) {
		warnings = append(warnings, fmt.Sprintf("kernel log: %d XID line(s) for PCI %s, where no GPU was found: not counted", unmatched[bus], bus))
	}
	return recorded, warnings
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
