//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestLivePage opens gpuwatch's live page in headless Chromium against a
// simulated DGX H100 whose GPU 3 falls off the bus after a few seconds,
// and checks what a user sees: eight GPU cards, the MIG instances, the
// processes with their owners, charts that gain points, the lost GPU
// turning "down", and no console error. (TestLivePageOwnersFirst takes
// the screenshots.)
func TestLivePage(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: dgx-h100\nfaults:\n  - {gpu: 3, lost_after: 4s}\n")
	// A window of 300 samples: one chart point per collection.
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg, "--ui.interval=1s", "--ui.history=5m")

	b := newBrowser(t)
	var cards, migs int
	var banner, procs string
	b.run(t,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`article.card[data-gpu="7"] .mig-instance`),
		chromedp.Evaluate(`document.querySelectorAll("article.card").length`, &cards),
		chromedp.Evaluate(`document.querySelectorAll('article.card[data-gpu="7"] .mig-instance').length`, &migs),
		visibleText(`#sim-banner`, &banner),
		chromedp.WaitVisible(`#processes tbody tr`),
		visibleText(`#processes tbody`, &procs),
	)
	if cards != 8 {
		t.Errorf("%d GPU cards, want 8", cards)
	}
	if migs != 4 {
		t.Errorf("GPU 7 shows %d MIG instances, want the simulator's 4", migs)
	}
	if !strings.Contains(banner, "Simulated GPUs") {
		t.Errorf("simulator banner: %q", banner)
	}
	// The demo's owners: a Slurm job, a compose service, a pod, a plain user.
	for _, want := range []string{"alice", "4211", "trainer", "vllm-0", "dave"} {
		if !strings.Contains(procs, want) {
			t.Errorf("process table lacks %q:\n%s", want, procs)
		}
	}

	// Who holds each GPU, idle or not, and since when: job 4225 of alice
	// holds GPU 5 and runs nothing there; the demo's jobs started 2 h 13
	// min before the simulated clock did.
	var idle, held string
	b.run(t, visibleText(`article.card[data-gpu="5"] .alloc`, &idle), visibleText(`article.card[data-gpu="0"] .alloc`, &held))
	if idle != "Idle, held by job 4225 of alice for 2 h" || held != "Held by job 4211 of alice for 2 h" {
		t.Errorf("GPU 5 says %q, GPU 0 says %q; want the idle job 4225 and the running 4211, both of alice", idle, held)
	}

	points := func() int {
		var n int
		b.run(t, chromedp.Evaluate(`Number(document.querySelector('article.card[data-gpu="0"] svg.chart').dataset.points)`, &n))
		return n
	}
	first := points()
	testenv.WaitFor(t, 20*time.Second, "GPU 0's utilization chart to gain points", func() bool { return points() >= first+2 })

	testenv.WaitFor(t, 30*time.Second, "GPU 3's card to turn down", func() bool {
		var state string
		b.run(t, visibleText(`article.card[data-gpu="3"] .state`, &state))
		return state == "down"
	})
	var up int
	var lost string
	b.run(t, chromedp.Evaluate(`document.querySelectorAll("article.card .state.up").length`, &up),
		visibleText(`article.card[data-gpu="3"] .alloc`, &lost))
	if up != 7 {
		t.Errorf("%d GPUs shown up after GPU 3 was lost, want 7", up)
	}
	// A lost GPU's processes are unknown: its job holds it, idle or not.
	if lost != "Held by job 4211 of alice for 2 h" {
		t.Errorf("the lost GPU 3 says %q, want who holds it and no claim that it is idle", lost)
	}

	// On a phone the page reflows into one column: nothing wider than the
	// screen but the process table, which scrolls inside its own box.
	var overflow int
	b.run(t,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Reload(),
		chromedp.WaitVisible(`article.card[data-gpu="7"] .mig-instance`),
		chromedp.Evaluate(`document.documentElement.scrollWidth - document.documentElement.clientWidth`, &overflow),
	)
	if overflow > 0 {
		t.Errorf("at 390 px the page is %d px wider than the screen", overflow)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestLivePageHistorySince: the page loads the whole history once, then
// asks only for what changed (?since=) and merges it: its chart has the
// same points as the server's whole history over the same span. 610
// samples at 100 ms make points of two intervals, so the newest point
// grows between polls and must be replaced, not appended.
func TestLivePageHistorySince(t *testing.T) {
	t.Parallel()
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile=dgx-h100", "--ui.interval=100ms", "--ui.history=61s")
	var doc struct {
		BucketSeconds float64 `json:"bucket_seconds"`
	}
	if err := json.Unmarshal([]byte(httpGet(t, base+"/api/v1/history")), &doc); err != nil || doc.BucketSeconds != 0.2 {
		t.Fatalf("bucket_seconds %g (%v), want 0.2: two 100 ms intervals", doc.BucketSeconds, err)
	}
	b := newBrowser(t)
	b.run(t, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`article.card[data-gpu="0"] svg.chart`))
	// The page polls every 500 ms (its floor); each poll adds about 2.5 points.
	var page struct{ Points, First, Last int64 }
	chartState := `(() => { const c = document.querySelector('article.card[data-gpu="0"] svg.chart');
		return {Points: Number(c.dataset.points), First: Number(c.dataset.first || 0), Last: Number(c.dataset.last || 0)}; })()`
	testenv.WaitFor(t, 60*time.Second, "GPU 0's chart to have 40 points", func() bool {
		b.run(t, chromedp.Evaluate(chartState, &page))
		return page.Points >= 40
	})
	var full, since int
	b.run(t, chromedp.Evaluate(`performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/v1/history") && !e.name.includes("since=")).length`, &full),
		chromedp.Evaluate(`performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/v1/history?since=")).length`, &since))
	if full != 1 || since < 5 {
		t.Errorf("the page fetched the whole history %d times and ?since= %d times; want once, then only ?since=", full, since)
	}
	// Between two polls the server's history gains points the page has
	// not asked for yet: compare over the page's span only.
	testenv.WaitFor(t, 30*time.Second, "GPU 0's chart to hold the server's points over its span", func() bool {
		b.run(t, chromedp.Evaluate(chartState, &page))
		var h struct {
			GPUs []struct {
				Time []int64    `json:"time_ms"`
				Util []*float64 `json:"utilization_gpu"`
			} `json:"gpus"`
		}
		if err := json.Unmarshal([]byte(httpGet(t, base+"/api/v1/history")), &h); err != nil {
			t.Fatal(err)
		}
		var n int64
		for i, ts := range h.GPUs[0].Time {
			if ts >= page.First && ts <= page.Last && h.GPUs[0].Util[i] != nil {
				n++
			}
		}
		if n != page.Points {
			t.Logf("page: %d points from %d to %d; server: %d", page.Points, page.First, page.Last, n)
		}
		return n == page.Points && page.Points >= 40
	})
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// visibleText reads the text of the first element matching selector ("" when
// there is none) in one step inside the page. chromedp.Text finds the node
// first and asks for its text in a second call, and the live page redraws
// its cards and tables every --ui.interval: the node found can be gone by
// then ("No node with given id found").
func visibleText(selector string, text *string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, selector), text)
}

// TestNoWebUI: --no-web.ui serves the plain landing page and no API.
func TestNoWebUI(t *testing.T) {
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile=h100", "--no-web.ui")
	if page := httpGet(t, base+"/"); strings.Contains(page, "/assets/app.js") || !strings.Contains(page, "/metrics") {
		t.Errorf("with --no-web.ui, / is not the plain landing page:\n%s", page)
	}
	for _, path := range []string{"/api/v1/snapshot", "/api/v1/history", "/assets/app.js"} {
		if _, err := httpGetNoFail(base + path); err == nil {
			t.Errorf("GET %s answered with --no-web.ui", path)
		}
	}
}
