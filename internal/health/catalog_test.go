package health

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestCatalogFollowsNVIDIA: every code of the pinned catalog rows is in
// the default policy with the class its immediate action implies (a GPU
// reset, a reboot or support fails the GPU, an application restart or
// "ignore" never does), and every code whose action is one of the
// catalog's workflows has its class and reason in workflowDecisions.
func TestCatalogFollowsNVIDIA(t *testing.T) {
	f, err := os.Open("testdata/xid-catalog.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gpuSide := map[string]bool{"RESET_GPU": true, "RESTART_BM": true, "CONTACT_SUPPORT": true}
	appSide := map[string]bool{"RESTART_APP": true, "IGNORE": true}
	workflow := regexp.MustCompile(`^(WORKFLOW_[A-Z0-9_]+|XID_154)$`)
	p := DefaultPolicy()
	rows := 0
	workflows := map[uint64]bool{}
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
		switch action := cols[2]; {
		case gpuSide[action] && got != LevelFail:
			t.Errorf("XID %d (%s, %s): level %s, want fail", code, cols[1], action, got)
		case appSide[action] && got == LevelFail:
			t.Errorf("XID %d (%s, %s): fails the GPU, but the catalog's action is the application's", code, cols[1], action)
		case workflow.MatchString(action):
			workflows[code] = true
			if workflowDecisions[code] == "" {
				t.Errorf("XID %d (%s, %s): a catalog workflow, but workflowDecisions does not say how the policy classes it", code, cols[1], action)
			}
		case !gpuSide[action] && !appSide[action]:
			t.Errorf("XID %d: unknown action %q", code, action)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != len(xidCatalog) {
		t.Errorf("%d pinned rows, %d codes in the policy's table: pin every code the policy classifies", rows, len(xidCatalog))
	}
	for code := range workflowDecisions {
		if !workflows[code] {
			t.Errorf("XID %d has a workflow decision but its pinned action is not a catalog workflow", code)
		}
	}
	// The examples, where the catalog agrees.
	for _, code := range []uint64{48, 64, 74, 79, 95, 119, 120} {
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

// TestShippedXIDAlertsFollowThePolicy keeps the shipped alert rules and the
// default policy in one mind: GPUXIDCritical fires on exactly the codes the
// policy fails a GPU on, GPUXIDApplication on exactly those it never does.
// Every selector of each expression is checked, so a copy left behind in
// one branch of an expression is caught too.
func TestShippedXIDAlertsFollowThePolicy(t *testing.T) {
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	raw, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	want := map[string]Level{"GPUXIDCritical": LevelFail, "GPUXIDApplication": LevelOff}
	selector := regexp.MustCompile(`xid=~"([0-9|]+)"`)
	seen := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			level, ok := want[r.Alert]
			if !ok {
				continue
			}
			seen[r.Alert] = true
			var policy []string
			for code, e := range xidCatalog {
				if e.level == level {
					policy = append(policy, strconv.FormatUint(code, 10))
				}
			}
			slices.Sort(policy)
			matches := selector.FindAllStringSubmatch(r.Expr, -1)
			if len(matches) == 0 {
				t.Errorf("%s: no xid=~ selector in %q", r.Alert, r.Expr)
			}
			for _, m := range matches {
				codes := strings.Split(m[1], "|")
				slices.Sort(codes)
				if !slices.Equal(codes, policy) {
					t.Errorf("%s selects XIDs %v; the default policy's %s codes are %v", r.Alert, codes, level, policy)
				}
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("deploy/prometheus/alerts.yml has no alert %s", name)
		}
	}
}
