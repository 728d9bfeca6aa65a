package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// browser is one headless Chromium with one tab, and what the page said on
// its console.
type browser struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string // console errors and uncaught exceptions
}

// newBrowser starts headless Chromium with a fresh profile, or skips the
// test when it is not installed (fails instead with CG_REQUIRE_BROWSER=1,
// as CI sets it).
func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CG_REQUIRE_BROWSER") == "1" {
			t.Fatalf("CG_REQUIRE_BROWSER=1 but %s is missing: install it with apt-get install -y chromium", chromiumPath)
		}
		t.Skipf("skipping the browser test: %s is missing (apt-get install -y chromium; CG_REQUIRE_BROWSER=1 makes this a failure)", chromiumPath)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf), chromedp.WithListener(b.listen))
	b.ctx = ctx
	// Start the browser now, so that a broken install fails here. The first
	// run's context lives as long as the browser, so it has no deadline of
	// its own: a stuck start is bounded by cancelling the tab.
	start := time.Now()
	stuck := time.AfterFunc(60*time.Second, cancelTab)
	err := chromedp.Do(ctx)
	stuck.Stop()
	if err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	return b
}

// listen records console errors and uncaught exceptions; it runs in the
// tab's event loop, so it only records.
func (b *browser) listen(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, strings.TrimSpace(string(a.Value)+" "+a.Description))
			}
			b.problem("console." + string(ev.Type) + ": " + strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.problem(fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
	}
}

func (b *browser) problem(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// Problems returns the console errors and exceptions so far.
func (b *browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// do runs actions with a deadline.
func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls a JavaScript condition every 20ms until it is true and
// returns how long that took, failing the test after limit with the page's
// text.
func (b *browser) waitJS(t *testing.T, limit time.Duration, what, cond string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(limit)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			cancel()
			t.Fatalf("%s: not seen within %v (last error %v)\npage text:\n%s", what, limit, err, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// screenshot saves a full-page PNG as a test artifact and returns it.
func (b *browser) screenshot(t *testing.T, name string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	return png
}

// artifactDir is where test artifacts go: $CG_ARTIFACTS when set, else
// the test's ArtifactDir.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("CG_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	return t.ArtifactDir()
}
