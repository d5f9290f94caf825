package health

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCatalogFollowsNVIDIA: every code of the pinned catalog rows is in
// the default policy with the class its immediate action implies (a GPU
// reset or a reboot fails the GPU, an application restart or "ignore"
// never does), except the listed stricter codes, each with its reason.
func TestCatalogFollowsNVIDIA(t *testing.T) {
	f, err := os.Open("testdata/xid-catalog.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gpuSide := map[string]bool{"RESET_GPU": true, "RESTART_BM": true, "CONTACT_SUPPORT": true}
	appSide := map[string]bool{"RESTART_APP": true, "IGNORE": true}
	p := DefaultPolicy()
	rows := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "code\t") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 4 || !(strings.HasPrefix(cols[3], "verified ") || strings.HasPrefix(cols[3], "UNVERIFIED")) {
			t.Fatalf("bad row %q: want code, mnemonic, action and whether it was verified", line)
		}
		code, err := strconv.ParseUint(cols[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		rows++
		if _, ok := xidCatalog[code]; !ok {
			t.Errorf("XID %d (%s) is pinned but not in the policy's table", code, cols[1])
			continue
		}
		got := p.XIDLevel(code)
		_, stricter := stricterThanCatalog[code]
		switch {
		case gpuSide[cols[2]] && got != LevelFail:
			t.Errorf("XID %d (%s, %s): level %s, want fail", code, cols[1], cols[2], got)
		case appSide[cols[2]] && got == LevelFail && !stricter:
			t.Errorf("XID %d (%s, %s): fails the GPU, but the catalog's action is the application's", code, cols[1], cols[2])
		case appSide[cols[2]] && got != LevelFail && stricter:
			t.Errorf("XID %d is listed as stricter than the catalog but does not fail", code)
		case !gpuSide[cols[2]] && !appSide[cols[2]]:
			t.Errorf("XID %d: unknown action %q", code, cols[2])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != len(xidCatalog) {
		t.Errorf("%d pinned rows, %d codes in the policy's table: pin every code the policy classifies", rows, len(xidCatalog))
	}
	// The examples, explicitly.
	for _, code := range []uint64{48, 63, 64, 74, 79, 94, 95, 119, 120} {
		if p.XIDLevel(code) != LevelFail {
			t.Errorf("XID %d must fail a GPU by default", code)
		}
	}
	for _, code := range []uint64{13, 31, 43, 45, 68} {
		if p.XIDLevel(code) != LevelOff {
			t.Errorf("application XID %d must never count by default", code)
		}
	}
	if p.XIDLevel(999) != LevelWarn {
		t.Errorf("an unknown XID must warn")
	}
}

// TestDocsListEveryCheckAndXID keeps docs/health.md's policy tables
// complete: every check and every XID code the policy classifies.
func TestDocsListEveryCheckAndXID(t *testing.T) {
	doc, err := os.ReadFile("../../docs/health.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, c := range Checks {
		if !strings.Contains(text, "| `"+c.Name+"` |") {
			t.Errorf("docs/health.md has no row for check %s", c.Name)
		}
	}
	for code := range xidCatalog {
		if !regexp.MustCompile(`\n\| ([0-9]+, )*` + strconv.FormatUint(code, 10) + `(, [0-9]+)* \|`).MatchString(text) {
			t.Errorf("docs/health.md's XID table does not name XID %d", code)
		}
	}
}
