//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// demoOwners is what each GPU card of the dgx-h100 demo must say about
// who holds the GPU: its allocation and the owners of its processes.
// Slurm says when a job started (the demo's jobs 2 h 13 min before the
// simulated clock); the kubelet does not, so a pod's line has no duration.
var demoOwners = map[int][]string{
	0: {"Held by job 4211 of alice for 2 h", "alice · job 4211 llama-pretrain"},
	1: {"Held by job 4211 of alice for 2 h", "alice · job 4211"},
	2: {"Held by job 4211 of alice for 2 h", "alice · job 4211"},
	3: {"Held by job 4211 of alice for 2 h", "alice · job 4211"},
	4: {"bob · compose finetune/trainer"},
	5: {"Idle, held by job 4225 of alice for 2 h"},
	6: {"Held by pod inference/vllm-0\n", "carol · pod inference/vllm-0", "dave"},
	7: {"Held by job 4218 of erin for 2 h", "Idle, held by pod inference/embedder-0 (MIG GI 5)\n", "GI 1 · erin · job 4218"},
}

// cardOwners is, per GPU card, the text of its owners block, whether the
// block lies wholly inside the screen (and is what the screen shows at
// its centre, nothing drawn over it) and wholly inside its card. With
// scroll set, each card is first scrolled to the top of the screen.
type cardOwner struct {
	GPU     int
	Text    string
	Visible bool
	InCard  bool
}

func cardOwnersJS(scroll bool) string {
	return `[...document.querySelectorAll("article.card")].map((card) => {
		if (` + map[bool]string{true: "true", false: "false"}[scroll] + `) card.scrollIntoView({block: "start"});
		const who = card.querySelector(".who");
		if (!who) return {GPU: Number(card.dataset.gpu), Text: "", Visible: false, InCard: false};
		const r = who.getBoundingClientRect(), c = card.getBoundingClientRect();
		const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
		return {GPU: Number(card.dataset.gpu), Text: who.innerText,
			Visible: r.height > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth && who.contains(top),
			InCard: r.top >= c.top && r.bottom <= c.bottom && r.left >= c.left && r.right <= c.right};
	})`
}

func checkOwners(t *testing.T, screen string, owners []cardOwner, wantVisible func(gpu int) bool) {
	t.Helper()
	if len(owners) != len(demoOwners) {
		t.Fatalf("%s: %d GPU cards, want %d", screen, len(owners), len(demoOwners))
	}
	for _, o := range owners {
		for _, want := range demoOwners[o.GPU] {
			if !strings.Contains(o.Text, want) {
				t.Errorf("%s: GPU %d's owners say %q, want %q in it", screen, o.GPU, o.Text, want)
			}
		}
		if !o.InCard {
			t.Errorf("%s: GPU %d's owners lie outside its card", screen, o.GPU)
		}
		if wantVisible(o.GPU) && !o.Visible {
			t.Errorf("%s: GPU %d's owners (%q) are not all on the screen", screen, o.GPU, o.Text)
		}
	}
}

// TestLivePageOwnersFirst opens the live page of the dgx-h100 demo in
// headless Chromium at 1400×1000 and at a phone's 390×844 and checks
// that it answers "who holds each GPU" first: at 1400×1000 every GPU's
// owners (its allocation, idle or not, and its processes' owners) lie
// inside the first screen; on the phone each card's owners are inside the
// card and on screen when the card is scrolled to, the first card's in
// the first screen. Its charts have a value axis, the current value and
// the value under the pointer; owner memory shares one scale; the MIG
// GPU says why it has no utilization. With UI_SCREENSHOT_DIR set (to
// docs), it writes the README's screenshots of both first screens.
func TestLivePageOwnersFirst(t *testing.T) {
	t.Parallel()
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile=dgx-h100", "--ui.interval=1s", "--ui.history=5m")
	b := newBrowser(t)
	// The charts have a few points: the screenshot shows lines.
	chartPoints := `Number((document.querySelector('article.card[data-gpu="0"] svg.chart') || {dataset: {}}).dataset.points || 0)`
	b.run(t,
		chromedp.EmulateViewport(1400, 1000),
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`article.card[data-gpu="7"] .mig-instance`),
	)
	testenv.WaitFor(t, 30*time.Second, "GPU 0's chart to have 4 points", func() bool {
		var n int
		b.run(t, chromedp.Evaluate(chartPoints, &n))
		return n >= 4
	})
	var owners []cardOwner
	b.run(t, chromedp.Evaluate(cardOwnersJS(false), &owners))
	checkOwners(t, "1400×1000", owners, func(int) bool { return true })

	// Every chart has its value axis and says its current value.
	var axes []struct{ Chart, Top, Bottom, Current string }
	b.run(t, chromedp.Evaluate(`[...document.querySelectorAll("article.card figure.chart-fig")].map((f) => ({Chart: f.dataset.chart,
		Top: f.querySelector(".axis.top").innerText, Bottom: f.querySelector(".axis.bottom").innerText, Current: f.querySelector(".current").innerText}))`, &axes))
	if len(axes) != 15 {
		t.Errorf("%d charts on the GPU cards, want 15: utilization and memory on 7 GPUs, memory only on the MIG GPU", len(axes))
	}
	util, mem := regexp.MustCompile(`^now \d+ %$`), regexp.MustCompile(`^now \d+(\.\d)? (B|GiB)$`)
	for _, a := range axes {
		switch {
		case strings.HasPrefix(a.Chart, "u"):
			if a.Top != "100 %" || a.Bottom != "0 %" || !util.MatchString(a.Current) {
				t.Errorf("utilization chart %s: axis %q to %q, current %q", a.Chart, a.Bottom, a.Top, a.Current)
			}
		case strings.HasPrefix(a.Chart, "m"):
			if a.Top != "79.6 GiB" || a.Bottom != "0 B" || !mem.MatchString(a.Current) {
				t.Errorf("memory chart %s: axis %q to %q, current %q", a.Chart, a.Bottom, a.Top, a.Current)
			}
		}
	}

	// The MIG GPU says why it has no utilization, and shows its instances.
	var migNote, migUtil string
	var migCharts, migInstances int
	b.run(t,
		visibleText(`article.card[data-gpu="7"] .mig-note`, &migNote),
		chromedp.Evaluate(`document.querySelectorAll('article.card[data-gpu="7"] figure[data-chart="u7"]').length`, &migCharts),
		chromedp.Evaluate(`[...document.querySelectorAll('article.card[data-gpu="7"] dt')].find((e) => e.innerText === "Utilization").nextElementSibling.innerText`, &migUtil),
		chromedp.Evaluate(`document.querySelectorAll('article.card[data-gpu="7"] .mig-instance').length`, &migInstances),
	)
	if migNote != "MIG mode: NVML reports no whole-GPU utilization; per-instance memory below." || migCharts != 0 || migUtil != "n/a (MIG mode)" || migInstances != 4 {
		t.Errorf("MIG GPU 7: note %q, %d utilization charts, utilization %q, %d instances; want the note, no chart, n/a and 4 instances", migNote, migCharts, migUtil, migInstances)
	}

	// Owner memory on one scale: job 4211's 296 GiB fills its chart,
	// dave's 3 GiB barely leaves the bottom.
	var scale []struct {
		Owner        string
		Max          float64
		LastFraction float64
	}
	b.run(t, chromedp.Evaluate(`[...document.querySelectorAll("#owners .owner")].map((o) => { const s = o.querySelector("svg.chart");
		return {Owner: o.dataset.owner, Max: Number(s.dataset.max), LastFraction: Number(s.dataset.lastFraction)}; })`, &scale))
	fraction := map[string]float64{}
	for _, s := range scale {
		fraction[s.Owner] = s.LastFraction
		if s.Max != scale[0].Max {
			t.Errorf("owner %s is charted up to %g bytes, %s up to %g: want one scale", s.Owner, s.Max, scale[0].Owner, scale[0].Max)
		}
	}
	if f, g := fraction["slurm_job:4211"], fraction["user:dave"]; f < 0.9 || g <= 0 || g > 0.05 {
		t.Errorf("on the shared scale job 4211 reaches %.3f and dave %.3f of it; want near 1 and under 0.05 (%v)", f, g, scale)
	}

	// Hovering a chart shows the value under the pointer, and it stays
	// through the redraw of the next interval.
	var box struct{ X, Y float64 }
	b.run(t, chromedp.Evaluate(`(() => { const r = document.querySelector('article.card[data-gpu="0"] figure[data-chart="u0"] .area').getBoundingClientRect();
		return {X: r.left + r.width / 2, Y: r.top + r.height / 2}; })()`, &box))
	b.run(t, chromedp.MouseEvent(input.MouseMoved, box.X, box.Y))
	tip := regexp.MustCompile(`^\d{1,2}:\d{2}:\d{2}( [AP]M)?: \d+ %$`)
	var hovered string
	testenv.WaitFor(t, 20*time.Second, "GPU 0's utilization chart to show the value under the pointer after a redraw", func() bool {
		var redrawn bool
		b.run(t, visibleText(`article.card[data-gpu="0"] figure[data-chart="u0"] .tip`, &hovered),
			chromedp.Evaluate(chartPoints+" > 4", &redrawn))
		return tip.MatchString(hovered) && redrawn
	})
	// Leaving the chart clears it, though the chart was redrawn meanwhile.
	b.run(t, chromedp.MouseEvent(input.MouseMoved, 5, 5))
	testenv.WaitFor(t, 10*time.Second, "the hover value to go once the pointer left the chart", func() bool {
		var shown int
		b.run(t, chromedp.Evaluate(`[...document.querySelectorAll(".tip")].filter((e) => !e.hidden).length`, &shown))
		return shown == 0
	})

	dir := os.Getenv("UI_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b.screenshotViewport(t, filepath.Join(dir, "ui-dgx-h100.png"))

	// The phone: one column, owners at the top of each card.
	var overflow int
	b.run(t,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Reload(),
		chromedp.WaitVisible(`article.card[data-gpu="7"] .mig-instance`),
	)
	testenv.WaitFor(t, 30*time.Second, "GPU 0's chart to have 4 points on the phone", func() bool {
		var n int
		b.run(t, chromedp.Evaluate(chartPoints, &n))
		return n >= 4
	})
	b.run(t, chromedp.Evaluate(cardOwnersJS(false), &owners),
		chromedp.Evaluate(`document.documentElement.scrollWidth - document.documentElement.clientWidth`, &overflow))
	checkOwners(t, "390×844, first screen", owners, func(gpu int) bool { return gpu == 0 })
	if overflow > 0 {
		t.Errorf("at 390 px the page is %d px wider than the screen", overflow)
	}
	b.screenshotViewport(t, filepath.Join(dir, "ui-dgx-h100-phone.png"))
	b.run(t, chromedp.Evaluate(cardOwnersJS(true), &owners))
	checkOwners(t, "390×844, each card scrolled to", owners, func(int) bool { return true })
	// The process table stacks each process's cells: none is off-screen.
	var offscreen []string
	b.run(t, chromedp.Evaluate(`[...document.querySelectorAll("#processes td")].filter((td) => td.getBoundingClientRect().right > window.innerWidth).map((td) => td.dataset.label + ": " + td.innerText)`, &offscreen))
	if len(offscreen) > 0 {
		t.Errorf("at 390 px these process cells lie right of the screen: %q", offscreen)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestLivePageBehindPathPrefix serves gpuwatch behind a reverse proxy at
// /gpu/ (as an ingress or nginx location would) and loads the page there:
// its stylesheet, script, API calls and links all stay under /gpu/, so
// the page fills with owners and charts, and nothing asks the proxy for a
// path outside it.
func TestLivePageBehindPathPrefix(t *testing.T) {
	t.Parallel()
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile=dgx-h100", "--ui.interval=1s")
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stray []string
	proxy := http.StripPrefix("/gpu", httputil.NewSingleHostReverseProxy(target))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/gpu/") {
			mu.Lock()
			stray = append(stray, r.URL.Path)
			mu.Unlock()
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	b := newBrowser(t)
	b.run(t, chromedp.Navigate(srv.URL+"/gpu/"))
	testenv.Eventually(t, 30*time.Second, func() error {
		var cards int
		b.run(t, chromedp.Evaluate(`document.querySelectorAll('article.card[data-gpu="5"] .alloc').length`, &cards))
		if cards == 0 {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("no GPU cards behind /gpu/; the page asked the proxy for %q, outside /gpu/", stray)
		}
		return nil
	})
	// Polling goes on through the proxy: a ?since= answer arrives.
	testenv.WaitFor(t, 30*time.Second, "the page to poll the history with ?since= through the proxy", func() bool {
		var n int
		b.run(t, chromedp.Evaluate(`performance.getEntriesByType("resource").filter((e) => e.name.includes("/gpu/api/v1/history?since=")).length`, &n))
		return n > 0
	})
	var idle, status, headerBg string
	var links, resources []string
	b.run(t,
		visibleText(`article.card[data-gpu="5"] .alloc`, &idle),
		visibleText(`#status`, &status),
		chromedp.Evaluate(`getComputedStyle(document.querySelector("header")).backgroundColor`, &headerBg),
		chromedp.Evaluate(`[...document.querySelectorAll("header nav a")].map((a) => a.href)`, &links),
		chromedp.Evaluate(`performance.getEntriesByType("resource").map((e) => e.name)`, &resources),
	)
	if idle != "Idle, held by job 4225 of alice for 2 h" || !strings.HasPrefix(status, "8 of 8 GPUs up") {
		t.Errorf("behind /gpu/: GPU 5 says %q, status %q", idle, status)
	}
	if headerBg != "rgb(22, 24, 29)" {
		t.Errorf("behind /gpu/ the stylesheet did not apply (header background %q)", headerBg)
	}
	want := []string{srv.URL + "/gpu/metrics", srv.URL + "/gpu/healthz", srv.URL + "/gpu/readyz", srv.URL + "/gpu/api/v1/snapshot"}
	if strings.Join(links, " ") != strings.Join(want, " ") {
		t.Errorf("links %q, want %q", links, want)
	}
	for _, l := range links {
		if body, err := httpGetNoFail(l); err != nil || body == "" {
			t.Errorf("link %s through the proxy: %v", l, err)
		}
	}
	for _, r := range resources {
		if !strings.HasPrefix(r, srv.URL+"/gpu/") {
			t.Errorf("the page fetched %s, outside /gpu/", r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stray) > 0 {
		t.Errorf("the proxy was asked for paths outside /gpu/: %q", stray)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestLivePageUnknowns: what the page does not know, it does not show as
// 0. When the driver cannot list a GPU's processes (the list never fits),
// the card of the GPU that job 4225 holds says the processes are unknown
// and why, and does not call the GPU idle: no process seen is not no
// process running. A GPU that gives no memory reading says n/a, and its
// memory chart has no invented scale.
func TestLivePageUnknowns(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: dgx-h100\nfaults:\n  - {gpu: 5, process_list_size: doubling}\n  - {gpu: 1, unsupported: [memory]}\n")
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg, "--ui.interval=1s")
	b := newBrowser(t)
	b.run(t, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`article.card[data-gpu="5"] .who`))
	var who, idle4 string
	b.run(t, visibleText(`article.card[data-gpu="5"] .who`, &who), visibleText(`article.card[data-gpu="4"] .who`, &idle4))
	if !strings.Contains(who, "Held by job 4225 of alice for 2 h") || strings.Contains(who, "Idle") ||
		!strings.Contains(who, "Processes unknown: the process list could not be read (insufficient_size)") {
		t.Errorf("GPU 5, whose process list cannot be read, says %q; want held by job 4225, not idle, processes unknown", who)
	}
	if !strings.Contains(idle4, "bob") || strings.Contains(idle4, "unknown") {
		t.Errorf("GPU 4, read as usual, says %q", idle4)
	}
	var mem struct{ Reading, Top, Bottom, Current string }
	b.run(t, chromedp.Evaluate(`(() => { const c = document.querySelector('article.card[data-gpu="1"]');
		const f = c.querySelector('figure[data-chart="m1"]');
		return {Reading: [...c.querySelectorAll("dt")].find((e) => e.innerText === "Memory").nextElementSibling.innerText,
			Top: f.querySelector(".axis.top").innerText, Bottom: f.querySelector(".axis.bottom").innerText, Current: f.querySelector(".current").innerText}; })()`, &mem))
	if mem.Reading != "n/a" || mem.Top != "" || mem.Bottom != "" || mem.Current != "now n/a" {
		t.Errorf("GPU 1 without memory readings: memory %q, chart axis %q to %q, %q; want n/a, no scale, now n/a", mem.Reading, mem.Bottom, mem.Top, mem.Current)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
