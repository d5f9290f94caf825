//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// browser is a headless Debian Chromium driven over the DevTools protocol
// (chromedp), collecting every console error and uncaught exception.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := testenv.RequireTool(t, "chromium", "chromium")
	// Not t.TempDir: Chromium's helper processes may still write to the
	// profile for a moment after the browser has exited, and t.TempDir's
	// one removal then fails the test ("directory not empty").
	profile, err := os.MkdirTemp("", "gpuwatch-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		testenv.Eventually(t, 30*time.Second, func() error { return os.RemoveAll(profile) })
	})
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	b := &browser{ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError || e.Type == runtime.APITypeWarning {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.add(fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " ")))
			}
		case *runtime.EventExceptionThrown:
			b.add("uncaught: " + e.ExceptionDetails.Error())
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return b
}

func (b *browser) add(msg string) {
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

// consoleErrors returns what the page logged as errors so far.
func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

func (b *browser) run(t *testing.T, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		t.Fatalf("chromium: %v", err)
	}
}

// screenshot saves the whole page as a PNG.
func (b *browser) screenshot(t *testing.T, path string) {
	t.Helper()
	var png []byte
	// Quality 100 makes a PNG; below that, chromedp encodes a JPEG.
	b.run(t, chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// screenshotViewport saves what the screen shows (the first screen,
// unless the page was scrolled) as a PNG.
func (b *browser) screenshotViewport(t *testing.T, path string) {
	t.Helper()
	var png []byte
	b.run(t, chromedp.CaptureScreenshot(&png))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
