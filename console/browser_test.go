package console_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/localcluster"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// The browser tests drive Debian's chromium (headless, through chromedp)
// against a real 3-node cluster with auth on: every page is the console
// as a node serves it, every call it makes goes to the cluster's API with
// the signed-in key.
//
// Without chromium they are skipped, unless CI is set: then they fail,
// so CI cannot pass without them (.ci/run installs chromium and sets CI).
// INTENTD_CONSOLE_SCREENSHOTS=DIR saves the documentation's screenshots
// (make console-screenshots); a failing test saves one of each open tab
// under $TMPDIR/intentd-console-failures and logs its path.

// namespace is the namespace of every test key.
const namespace = "payments"

// findChromium returns the browser to drive, or skips (fails in CI).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("INTENTD_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set and no chromium is on PATH: the console's browser tests must run in CI (.ci/run installs Debian's chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install chromium, or set INTENTD_CHROMIUM): the console's browser tests are skipped outside CI")
	return ""
}

// suite is the cluster, its keys and the browser the subtests share.
type suite struct {
	cluster *localcluster.Cluster
	// nodes are the nodes' base URLs.
	nodes []string
	// keys are the API keys by name: agent, alice, bob, carol (approvers),
	// dave (agent and approver: he claims, and may approve others'
	// claims), reader and admin, all in namespace payments.
	keys    map[string]string
	browser context.Context
}

func TestConsoleInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a browser: integration tier")
	}
	chromium := findChromium(t)
	s := &suite{keys: map[string]string{}}
	var entries []string
	for _, k := range []struct{ name, role string }{
		{"agent", "agent"}, {"alice", "approver"}, {"bob", "approver"}, {"carol", "approver"}, {"dave", "agent+approver"}, {"reader", "reader"}, {"admin", "admin"},
	} {
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s.keys[k.name] = plain
		entries = append(entries, fmt.Sprintf("%s:%s:%s:%s", k.name, namespace, k.role, sum))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard for the start
	defer cancel()
	c, err := localcluster.StartWith(ctx, localcluster.Options{Size: 3, APIKeys: strings.Join(entries, ",")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s.cluster, s.nodes = c, c.URLs()
	s.browser = startBrowser(t, chromium)

	s.api(t, "admin", "PUT", "/v1/policies/refunds", map[string]any{"tools": []string{"payments.refund"},
		"require_approval": true, "approvals_required": 2, "approvers": []string{"alice", "bob", "carol"}}, 200)
	s.api(t, "admin", "PUT", "/v1/policies/quick", map[string]any{"tools": []string{"payments.quick"},
		"require_approval": true, "approvals_required": 1, "dedupe_window_ms": 1000}, 200)

	start := time.Now()
	t.Run("SignIn", s.testSignIn)
	t.Run("ApprovalsLive", s.testApprovalsLive)
	t.Run("PayloadChangedIsRefused", s.testPayloadChanged)
	t.Run("InDoubtResolved", s.testInDoubt)
	t.Run("AuditVerifiedAndExported", s.testAudit)
	t.Run("AuditTamperedPage", s.testAuditTampered)
	t.Run("ReaderCannotApprove", s.testReader)
	t.Run("IntentPageDecides", s.testIntentPage)
	t.Run("KeyboardLabelsAndWidths", s.testAccessible)
	t.Run("PolicyCompareAndSet", s.testPolicyEdit)
	t.Run("ControlsOnlyWhereTheKeyMayAct", s.testControls)
	t.Run("DecidedElsewhere", s.testDecidedElsewhere)
	t.Run("PayloadReadWhole", s.testPayloadWhole)
	t.Run("NamespaceUsage", s.testUsage)
	t.Run("AuthOff", func(t *testing.T) { testAuthOff(t, s.browser) })
	t.Logf("the browser tests took %v after the cluster started", time.Since(start).Round(time.Millisecond))
}

// startBrowser starts headless chromium for the test (no sandbox as root,
// where chromium refuses to start with one).
func startBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// api calls the API as the named key (on the first node; followers
// forward) and checks the status; a 503 (a leader change) is retried.
func (s *suite) api(t *testing.T, key, method, path string, body any, want int) nodetest.Answer {
	t.Helper()
	var a nodetest.Answer
	nodetest.WaitFor(t, 30*time.Second, method+" "+path+" to answer", func() bool {
		var err error
		a, err = nodetest.SendAs(s.keys[key], method, strings.TrimPrefix(s.nodes[0], "http://"), path, body)
		return err == nil && a.Code != 503
	})
	if a.Code != want {
		t.Fatalf("%s %s as %s = %d %v, want %d", method, path, key, a.Code, a.Body, want)
	}
	return a
}

// intent reads an intent through the API (404: nil).
func (s *suite) intent(t *testing.T, key string) map[string]any {
	t.Helper()
	a, err := nodetest.SendAs(s.keys["admin"], "GET", strings.TrimPrefix(s.nodes[0], "http://"), "/v1/intents/"+key, nil)
	if err != nil || a.Code == 404 {
		return nil
	}
	return a.Body
}

// claim is the agent's claim; it returns the answer's intent.
func (s *suite) claim(t *testing.T, key, tool string, payload map[string]any, leaseMS int, want int) map[string]any {
	t.Helper()
	body := map[string]any{"key": key, "tool": tool, "owner": "agent-7/" + key, "payload": payload}
	if leaseMS > 0 {
		body["lease_ms"] = leaseMS
	}
	return nodetest.IntentOf(s.api(t, "agent", "POST", "/v1/intents", body, want).Body)
}

// tab is one browser tab with its own sessionStorage (so its own
// sign-in). It records the page's uncaught exceptions and the browser's
// security messages (a CSP violation) and fails the test on any; if the
// test fails it saves a screenshot.
type tab struct {
	t    *testing.T
	name string
	ctx  context.Context

	mu       sync.Mutex
	problems []string
}

func (s *suite) tab(t *testing.T, name string) *tab {
	return newTab(t, s.browser, name)
}

func newTab(t *testing.T, browserCtx context.Context, name string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("tab %s: %v", name, err)
	}
	b := &tab{t: t, name: name, ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Source == "security" || m.Type == chromedp.ConsoleError && m.Source == "" {
				b.mu.Lock()
				b.problems = append(b.problems, m.String()+" at "+m.URL)
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		b.mu.Lock()
		problems := append([]string(nil), b.problems...)
		b.mu.Unlock()
		for _, p := range problems {
			t.Errorf("tab %s: the page reported %s", name, p)
		}
		if t.Failed() {
			b.saveFailure()
		}
	})
	return b
}

// saveFailure saves a screenshot of the tab for a failed test.
func (b *tab) saveFailure() {
	dir := filepath.Join(os.TempDir(), "intentd-console-failures")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Logf("screenshot dir: %v", err)
		return
	}
	name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(b.t.Name()+"-"+b.name, "_") + ".png"
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("tab %s: no failure screenshot: %v", b.name, err)
		return
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("tab %s: %v", b.name, err)
		return
	}
	b.t.Logf("tab %s: screenshot of the failure: %s", b.name, path)
}

// step bounds one browser action (a hang guard, not a timing threshold).
const step = 30 * time.Second

func (b *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("tab %s: %s: %v", b.name, what, err)
	}
}

func evalJS[T any](b *tab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("tab %s: %s: %v", b.name, expr, err)
	}
	return v
}

func (b *tab) goTo(url string) { b.t.Helper(); b.do("open "+url, chromedp.Navigate(url)) }

func (b *tab) waitVisible(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("tab %s: waiting for %s: %v\n%s", b.name, sel, err, b.diagnose())
	}
}

// diagnose says where the page is and what it loaded, for a failure.
func (b *tab) diagnose() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " (" + document.readyState + ")\n" +
		performance.getEntriesByType("resource").map((e) => "  " + e.name + " " + Math.round(e.duration) + " ms" +
			(e.responseEnd ? "" : " (no answer)")).join("\n")`))
	if err != nil {
		return "the page cannot be read: " + err.Error()
	}
	return "the page: " + s
}

// waitText waits until the element sel holds text. It checks again
// while the page navigates (a sign-in moves to the page asked for).
func (b *tab) waitText(sel, text string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.textContent.includes(%s); })()`, jsString(sel), jsString(text))
	b.waitJS(fmt.Sprintf("%q in %s", text, sel), js)
	_ = b.text(sel) // the page holds it now, not just during a navigation
}

// waitJS waits until the JavaScript expression is true in the page (a
// condition polled, as nodetest.WaitFor polls; step is a hang guard).
func (b *tab) waitJS(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(step)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, step)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("tab %s: timed out waiting for %s (last error: %v)\n%s", b.name, what, err, b.diagnose())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *tab) text(sel string) string {
	b.t.Helper()
	return evalJS[string](b, fmt.Sprintf(`document.querySelector(%s).textContent`, jsString(sel)))
}

func (b *tab) count(sel string) int {
	b.t.Helper()
	return evalJS[int](b, fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel)))
}

// fill empties the field sel and types value into it.
func (b *tab) fill(sel, value string) {
	b.t.Helper()
	b.waitVisible(sel)
	evalJS[bool](b, fmt.Sprintf(`(() => { document.querySelector(%s).value = ""; return true; })()`, jsString(sel)))
	b.do("type into "+sel, chromedp.SendKeys(chromedp.CSS(sel), value))
}

func (b *tab) click(sel string) { b.t.Helper(); b.do("click "+sel, chromedp.Click(chromedp.CSS(sel))) }

// signIn opens page on node as the named key, through the sign-in page.
func (b *tab) signIn(s *suite, node int, key, page string) {
	b.t.Helper()
	b.goTo(s.nodes[node] + "/ui/sign-in?next=" + url.QueryEscape(page))
	b.fill(`#sign-in-form input[name="key"]`, s.keys[key])
	b.click(`#sign-in-form button[type="submit"]`)
	b.waitText("#whoami", key+" · namespace "+namespace)
}

// screenshot saves the documentation's screenshot of the tab (1280 px
// wide) when INTENTD_CONSOLE_SCREENSHOTS names a directory.
func (b *tab) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("INTENTD_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func card(key string) string { return fmt.Sprintf(`article[data-key=%s]`, jsString(key)) }

// waitState waits until the card sel shows its intent in state: the
// badge in its header.
func (b *tab) waitState(sel, state string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%s to show state %s", sel, state), fmt.Sprintf(`(() => { const e = document.querySelector(%s);
		const badge = e && e.querySelector("header .badge");
		return !!badge && badge.textContent === %s; })()`, jsString(sel), jsString(strings.ReplaceAll(state, "_", " "))))
}

// buttons lists the classes of the buttons of the card sel that decide
// or resolve (approve, reject, resolve), in order.
func (b *tab) buttons(sel string) []string {
	b.t.Helper()
	return evalJS[[]string](b, fmt.Sprintf(`[...document.querySelectorAll(%s)].map((e) => e.classList.contains("approve") ? "approve" :
		e.classList.contains("reject") ? "reject" : "resolve")`, jsString(sel+" button.approve, "+sel+" button.reject, "+sel+" button.resolve")))
}

// screenshots saves the documentation's screenshot of the tab at 1280 px
// (name) and at 390 px (name with -390), then goes back to 1280 px.
func (b *tab) screenshots(name string) {
	b.t.Helper()
	if os.Getenv("INTENTD_CONSOLE_SCREENSHOTS") == "" {
		return
	}
	b.screenshot(name)
	b.do("resize to 390 px", chromedp.EmulateViewport(390, 900))
	b.screenshot(strings.TrimSuffix(name, ".png") + "-390.png")
	b.do("resize to 1280 px", chromedp.EmulateViewport(1280, 900))
}

// testSignIn: a page without a key goes to sign-in; a bad key is refused
// there; a good one lands on the page asked for, showing who it is.
func (s *suite) testSignIn(t *testing.T) {
	b := s.tab(t, "sign-in")
	b.goTo(s.nodes[0] + "/ui/approvals")
	b.waitVisible("#sign-in-form")
	if loc := evalJS[string](b, "location.pathname + location.search"); loc != "/ui/sign-in?next=%2Fui%2Fapprovals" {
		t.Errorf("a page without a key sent the browser to %s", loc)
	}
	b.fill(`#sign-in-form input[name="key"]`, "ik_"+strings.Repeat("x", 43))
	b.click(`#sign-in-form button[type="submit"]`)
	b.waitText("#sign-in-form", "This key is not valid for this cluster")
	b.fill(`#sign-in-form input[name="key"]`, s.keys["alice"])
	b.click(`#sign-in-form button[type="submit"]`)
	b.waitText("#whoami", "alice · namespace payments · roles approver")
	if loc := evalJS[string](b, "location.pathname"); loc != "/ui/approvals" {
		t.Errorf("after signing in the browser is at %s, want /ui/approvals", loc)
	}
	if key := evalJS[string](b, `sessionStorage.getItem("intentd.apiKey")`); key != s.keys["alice"] {
		t.Errorf("sessionStorage holds %q", key)
	}
	b.waitText("#main", "Approvals")
}

// testApprovalsLive: an agent's claim under a 2-of-3 policy appears on two
// approvers' open pages (on two nodes) without a reload; alice approves
// with the mouse, bob with the keyboard only, and the agent's next claim
// is granted.
func (s *suite) testApprovalsLive(t *testing.T) {
	alice, bob, carol := s.tab(t, "alice"), s.tab(t, "bob"), s.tab(t, "carol")
	alice.signIn(s, 0, "alice", "/ui/approvals")
	bob.signIn(s, 1, "bob", "/ui/approvals")
	carol.signIn(s, 2, "carol", "/ui/approvals")
	for _, b := range []*tab{alice, bob, carol} {
		b.waitText("#live-status", "Live:")
		evalJS[bool](b, "window.loadedBeforeTheClaim = true")
	}

	payload := map[string]any{"order": "ord_98231", "amount": 4200, "currency": "eur", "reason": "damaged in transit"}
	pending := s.claim(t, "refund:ord_98231", "payments.refund", payload, 0, 202)
	s.claim(t, "refund:ord_98232", "payments.refund", map[string]any{"order": "ord_98232", "amount": 1299, "currency": "eur"}, 0, 202)
	c := card("refund:ord_98231")
	for _, b := range []*tab{alice, bob, carol} {
		b.waitVisible(c)
		b.waitVisible(card("refund:ord_98232"))
		if !evalJS[bool](b, "window.loadedBeforeTheClaim === true") {
			t.Fatalf("tab %s reloaded to show the claim", b.name)
		}
	}
	alice.waitText(c+" .owner", "agent-7/refund:ord_98231")
	if fp := alice.text(c + " .fp"); fp != pending["fingerprint"] {
		t.Errorf("the card shows fingerprint %q, the intent has %v", fp, pending["fingerprint"])
	}
	if p := alice.text(c + " pre.payload"); !strings.Contains(p, `"amount": 4200`) || !strings.Contains(p, `"reason": "damaged in transit"`) {
		t.Errorf("the payload shown:\n%s", p)
	}

	alice.fill(c+" input.reason", "customer called, photo attached")
	alice.click(c + " button.approve")
	alice.waitText(c+" .result", "Your approval is recorded")
	alice.waitText(c+" .approvals", "1 of 2: alice (customer called, photo attached)")
	// alice may not approve twice (the ledger would answer
	// already_approved): her card says so and offers Reject only.
	alice.waitText(c+" .why-not", "You already approved this intent")
	if got := alice.buttons(c); strings.Join(got, ",") != "reject" {
		t.Errorf("after approving, alice's card offers %v, want reject only", got)
	}
	alice.screenshots("console-approvals.png")

	// bob's page learns of alice's approval by itself; bob reaches the
	// reason field with Tab alone and submits with Enter.
	bob.waitText(c+" .approvals", "1 of 2: alice")
	target := c + " input.reason"
	reached := false
	for range 80 {
		bob.do("press Tab", chromedp.KeyEvent(kb.Tab))
		if evalJS[bool](bob, fmt.Sprintf("document.activeElement === document.querySelector(%s)", jsString(target))) {
			reached = true
			break
		}
	}
	if !reached {
		t.Fatal("80 presses of Tab did not reach the reason field of the card")
	}
	bob.do("type a reason and press Enter", chromedp.KeyEvent("order checked"+kb.Enter))
	bob.waitText(c+" .result", "Approved")

	in := s.intent(t, "refund:ord_98231")
	if in["state"] != "approved" {
		t.Fatalf("after two approvals in the browser the intent is %v", in)
	}
	// bob's approval, made in another tab on another node, re-renders
	// alice's and carol's cards: approved, 2 of 2, nothing left to decide,
	// no control (the ledger would answer not_pending_approval).
	for _, b := range []*tab{alice, carol} {
		b.waitState(c, "approved")
		b.waitText(c+" .approvals", "2 of 2: alice (customer called, photo attached), bob (order checked)")
		b.waitText(c+" .state-note", "Approved")
		if got := b.buttons(c); len(got) != 0 {
			t.Errorf("tab %s: the approved intent's card offers %v", b.name, got)
		}
		if res := b.text(c + " .result"); strings.Contains(res, "waits for the others") {
			t.Errorf("tab %s: the approved intent's card still says %q", b.name, res)
		}
	}
	granted := s.claim(t, "refund:ord_98231", "payments.refund", payload, 0, 201)
	if granted["state"] != "declared" {
		t.Fatalf("the agent's next claim: %v", granted)
	}
	carol.waitState(c, "declared")
	carol.waitText(c+" .state-note", "Approved and granted")
	// The agent reports, so no lease passes later in the run.
	s.api(t, "agent", "POST", "/v1/intents/refund:ord_98231/complete", map[string]any{"owner": granted["owner"],
		"fencing_token": granted["fencing_token"], "outcome": "executed", "result": map[string]any{"refund": "re_1Q2"}}, 200)
	for _, b := range []*tab{alice, bob, carol} {
		b.waitState(c, "executed")
		b.waitText(c+" .state-note", "Approved, granted and executed")
	}
}

// testPayloadChanged: the page shows a pending intent; someone rejects it,
// it is purged and claimed again with another payload. The card keeps the
// payload the person saw, says it changed and offers no decision on it
// (the ledger would refuse it), only to show the new payload. A page that
// did not learn of the change in time (its live updates held by the test)
// sends the decision with the fingerprint it showed: the ledger refuses it
// (422 divergent), the card says so with both fingerprints and follows the
// intent the refusal carries.
func (s *suite) testPayloadChanged(t *testing.T) {
	alice := s.tab(t, "alice")
	alice.signIn(s, 2, "alice", "/ui/approvals")
	alice.waitText("#live-status", "Live:")
	first := s.claim(t, "quick:42", "payments.quick", map[string]any{"amount": 100}, 0, 202)
	c := card("quick:42")
	alice.waitVisible(c)

	bob := s.tab(t, "bob")
	bob.signIn(s, 0, "bob", "/ui/")
	bob.holdLiveUpdates()
	bob.goTo(s.nodes[0] + "/ui/approvals")
	bob.waitState(c, "pending_approval")

	s.api(t, "carol", "POST", "/v1/intents/quick:42/reject", map[string]any{"reason": "wrong amount", "fingerprint": first["fingerprint"]}, 200)
	nodetest.WaitFor(t, 30*time.Second, "the rejected intent to be purged", func() bool { return s.intent(t, "quick:42") == nil })
	second := s.claim(t, "quick:42", "payments.quick", map[string]any{"amount": 999}, 0, 202)
	if second["fingerprint"] == first["fingerprint"] {
		t.Fatal("the second payload has the first one's fingerprint")
	}
	alice.waitVisible(c + ".stale")
	alice.waitText(c+" .change", "The payload changed after this page showed it")
	if p := alice.text(c + " pre.payload"); !strings.Contains(p, `"amount": 100`) {
		t.Errorf("the card no longer shows the payload the person saw:\n%s", p)
	}
	if got := alice.buttons(c); len(got) != 0 {
		t.Errorf("the card of a payload that changed offers %v on the old payload", got)
	}
	// The warning shows what changed, line by line.
	if del, add := alice.text(c+" .change pre.diff .del"), alice.text(c+" .change pre.diff .add"); !strings.Contains(del, `"amount": 100`) ||
		!strings.Contains(add, `"amount": 999`) {
		t.Errorf("the change's diff removes %q and adds %q, want the old and the new amount", del, add)
	}

	// bob's page never heard of the change: his approval carries the
	// fingerprint it showed.
	if bob.count(c+".stale") != 0 {
		t.Fatal("bob's page learnt of the change: the test did not hold its live updates")
	}
	bob.fill(c+" input.reason", "looks fine")
	bob.click(c + " button.approve")
	bob.waitText(c+" .result", "Refused: the payload changed after this page showed it")
	res := bob.text(c + " .result")
	if !strings.Contains(res, first["fingerprint"].(string)) || !strings.Contains(res, second["fingerprint"].(string)) {
		t.Errorf("the refusal does not name both fingerprints: %s", res)
	}
	bob.waitVisible(c + ".stale")
	if got := bob.buttons(c); len(got) != 0 {
		t.Errorf("after the divergent refusal bob's card offers %v", got)
	}
	if in := s.intent(t, "quick:42"); in["state"] != "pending_approval" || in["approvals"] != nil {
		t.Fatalf("after the refused approval the intent is %v", in)
	}

	// Asked, alice's card shows the new payload, and the decision is hers
	// again (carrying the new fingerprint).
	alice.click(c + " button.show-new")
	alice.waitText(c+" pre.payload", `"amount": 999`)
	if del := alice.text(c + " .payload-diff pre.diff .del"); !strings.Contains(del, `"amount": 100`) {
		t.Errorf("under the new payload the diff removes %q, want the amount reviewed before", del)
	}
	if fp := alice.text(c + " .fp"); fp != second["fingerprint"] {
		t.Errorf("after showing the new payload the card shows fingerprint %q, want %v", fp, second["fingerprint"])
	}
	if got := alice.buttons(c); strings.Join(got, ",") != "approve,reject" {
		t.Errorf("the card of the new payload offers %v", got)
	}
}

// holdLiveUpdates holds the tab's live long-polls (GET /v1/audit with
// wait) in the browser, unanswered, from now on: its pages then show
// what they first read and learn of nothing after it.
func (b *tab) holdLiveUpdates() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*/v1/audit?since=*wait=*", RequestStage: fetch.RequestStageRequest}}}); err != nil {
		b.t.Fatal(err)
	}
}

// testInDoubt: two grants whose leases pass without a report are listed
// in doubt; one is resolved in the browser and the API shows it resolved.
func (s *suite) testInDoubt(t *testing.T) {
	for _, k := range []string{"charge:order-17", "charge:order-18"} {
		s.claim(t, k, "payments.charge", map[string]any{"order": strings.TrimPrefix(k, "charge:"), "amount": 2599, "currency": "usd"}, 100, 201)
	}
	nodetest.WaitFor(t, 30*time.Second, "both leases to pass", func() bool {
		a, b := s.intent(t, "charge:order-17"), s.intent(t, "charge:order-18")
		return a["state"] == "in_doubt" && b["state"] == "in_doubt"
	})
	alice := s.tab(t, "alice")
	alice.signIn(s, 1, "alice", "/ui/in-doubt")
	c := card("charge:order-17")
	alice.waitVisible(c)
	alice.waitVisible(card("charge:order-18"))
	alice.waitText(c+" ol.timeline", "expire")
	alice.screenshots("console-in-doubt.png")

	alice.click(c + ` input[value="executed"]`)
	alice.fill(c+` textarea[name="result"]`, `{"charge_id":"ch_3Px","amount":2599}`)
	alice.fill(c+" input.reason", "found ch_3Px in the provider dashboard")
	alice.click(c + " button.resolve")
	alice.waitText(c+" .result", "Resolved: executed")
	in := s.intent(t, "charge:order-17")
	result, _ := json.Marshal(in["result"])
	if in["state"] != "executed" || string(result) != `{"amount":2599,"charge_id":"ch_3Px"}` {
		t.Fatalf("the API shows %v (result %s)", in, result)
	}
	trail := s.api(t, "reader", "GET", "/v1/intents/charge:order-17/audit", nil, 200)
	events, _ := trail.Body["events"].([]any)
	last, _ := events[len(events)-1].(map[string]any)
	if last["op"] != "resolve" || last["actor"] != "alice" || last["reason"] != "found ch_3Px in the provider dashboard" {
		t.Errorf("the last event of the trail: %v", last)
	}
}

// auditHead reads the namespace's audit head.
func (s *suite) auditHead(t *testing.T) client.AuditHead {
	t.Helper()
	a := s.api(t, "reader", "GET", "/v1/audit?limit=1", nil, 200)
	data, _ := json.Marshal(a.Body["head"])
	var h client.AuditHead
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// testAudit: the audit page verifies the whole chain in the browser and
// says so; its export downloads, and the SDK's verifier (the one intentctl
// audit verify runs) accepts the file.
func (s *suite) testAudit(t *testing.T) {
	head := s.auditHead(t)
	b := s.tab(t, "reader")
	b.signIn(s, 0, "reader", "/ui/audit")
	b.waitText("#chain-verdict", fmt.Sprintf("Chain intact from seq 1 to %d", head.LastSeq))
	b.screenshots("console-audit.png")

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	downloads := chromedp.BrowserEvents(ctx, browser.DownloadProgress)
	events := true
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir, EventsEnabled: &events}); err != nil {
		t.Fatal(err)
	}
	b.click("#export")
	for ev, err := range downloads {
		if err != nil {
			t.Fatalf("waiting for the export to download: %v", err)
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			break
		}
		if ev.State == browser.DownloadProgressStateCanceled {
			t.Fatal("the export's download was cancelled")
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "audit-payments.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := verifyExport(data)
	if err != nil || n != int(head.LastSeq) {
		t.Fatalf("the console's export: %d events verified, %v (the log holds %d)", n, err, head.LastSeq)
	}
}

// verifyExport checks a JSON-lines export with the SDK's ChainVerifier.
func verifyExport(data []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	if !sc.Scan() {
		return 0, fmt.Errorf("empty export")
	}
	var first struct {
		Head client.AuditHead `json:"head"`
	}
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil {
		return 0, err
	}
	v := client.NewChainVerifier(first.Head)
	for sc.Scan() {
		var r client.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return 0, err
		}
		if err := v.Add(r); err != nil {
			return 0, err
		}
	}
	return v.Finish(first.Head)
}

// testAuditTampered: the test serves the page an audit page with one byte
// of event 3 changed (through the browser's Fetch domain); the page names
// seq 3 as the first broken link.
func (s *suite) testAuditTampered(t *testing.T) {
	b := s.tab(t, "reader")
	b.signIn(s, 0, "reader", "/ui/")
	paused := chromedp.Events(b.ctx, fetch.RequestPaused)
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*/v1/audit?since=*&limit=1000*", RequestStage: fetch.RequestStageResponse}}}); err != nil {
		t.Fatal(err)
	}
	tampered := make(chan string, 4)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			body, err := chromedp.Call(b.ctx, fetch.GetResponseBody, fetch.GetResponseBodyParams{RequestID: ev.RequestID})
			if err != nil {
				return
			}
			changed, what := tamper(body.Body)
			_, _ = chromedp.Call(b.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID,
				ResponseCode: ev.ResponseStatusCode, ResponseHeaders: ev.ResponseHeaders, Body: changed})
			tampered <- what
		}
	}()
	b.goTo(s.nodes[0] + "/ui/audit")
	b.waitText("#chain-verdict", "Chain broken at seq 3")
	b.waitText("#chain-verdict", "it was altered")
	select {
	case what := <-tampered:
		if what == "" {
			t.Fatal("the page's audit answer had no event 3 to tamper with")
		}
	case <-time.After(step): // a hang guard
		t.Fatal("no audit page went through the tampering")
	}
}

// tamper changes one byte of event 3 in an audit page: the first letter
// of its op.
func tamper(page []byte) ([]byte, string) {
	out := bytes.Clone(page)
	at := bytes.Index(out, []byte(`"event":{"seq":3,`))
	if at < 0 {
		return out, ""
	}
	op := bytes.Index(out[at:], []byte(`"op":"`))
	if op < 0 {
		return out, ""
	}
	i := at + op + len(`"op":"`)
	out[i] ^= 0x20 // "claim" -> "Claim"
	return out, string(page[i : i+1])
}

// testReader: a reader-role key sees the queue but no Approve, Reject or
// Resolve control, and an approval forged from its page (its key, the
// API) is refused 403 and changes nothing.
func (s *suite) testReader(t *testing.T) {
	b := s.tab(t, "reader")
	b.signIn(s, 1, "reader", "/ui/approvals")
	c := card("refund:ord_98232")
	b.waitVisible(c)
	b.waitText("#main", "You may look, not decide")
	if n := b.count("button.approve, button.reject, form.decide"); n != 0 {
		t.Errorf("a reader sees %d decision controls", n)
	}
	before := s.intent(t, "refund:ord_98232")
	status := evalJS[int](b, fmt.Sprintf(`fetch("/v1/intents/" + encodeURIComponent("refund:ord_98232") + "/approve", {method: "POST",
		headers: {"Authorization": "Bearer " + sessionStorage.getItem("intentd.apiKey"), "Content-Type": "application/json"},
		body: JSON.stringify({actor: "alice", reason: "forged", fingerprint: %s})}).then((r) => r.status)`, jsString(before["fingerprint"].(string))))
	if status != 403 {
		t.Errorf("an approval forged from the reader's page got %d, want 403", status)
	}
	if after := s.intent(t, "refund:ord_98232"); after["state"] != "pending_approval" || after["approvals"] != nil || after["version"] != before["version"] {
		t.Errorf("the forged approval changed the intent: %v", after)
	}
	b.goTo(s.nodes[1] + "/ui/in-doubt")
	b.waitVisible(card("charge:order-18"))
	b.waitText("#main", "You may look, not resolve")
	if n := b.count("button.resolve, form.resolve"); n != 0 {
		t.Errorf("a reader sees %d resolve controls", n)
	}
}

// testUsage: the start page shows what the key's namespace holds, as the
// API reads it (GET /v1/namespaces/{ns}/usage). (Every key of the suite
// may read: agent and approver imply reader, so the panel's "needs the
// reader role" is not driven here.)
func (s *suite) testUsage(t *testing.T) {
	b := s.tab(t, "reader")
	b.signIn(s, 1, "reader", "/ui/")
	b.waitText("#usage", "Stored bytes")
	u := s.api(t, "reader", "GET", "/v1/namespaces/"+namespace+"/usage", nil, 200).Body
	byState, _ := u["by_state"].(map[string]any)
	for _, want := range []string{
		"Namespace" + namespace,
		fmt.Sprintf("In doubt%v", byState["in_doubt"]),
		"Claims per secondno quota",
	} {
		if got := b.text("#usage"); !strings.Contains(got, want) {
			t.Errorf("the usage panel says %q, want it to hold %q", got, want)
		}
	}
	if n := evalJS[int](b, `Number(document.querySelector("#usage dd:nth-of-type(2)").textContent)`); n < 1 {
		t.Errorf("the usage panel shows %d intents in a namespace the suite claimed in", n)
	}
}

// a11yProblems lists the page's controls without a label or a name, and
// whether the page is wider than the window.
const a11yProblems = `(() => {
  const out = [];
  for (const el of document.querySelectorAll("input, select, textarea")) {
    const named = (el.labels && el.labels.length) || el.getAttribute("aria-label") || el.getAttribute("aria-labelledby");
    if (!named) out.push("a control without a label: " + el.outerHTML.slice(0, 100));
  }
  for (const el of document.querySelectorAll("button, a[href], [tabindex]")) {
    if (!(el.textContent.trim() || el.getAttribute("aria-label") || el.id === "main")) out.push("a control without a name: " + el.outerHTML.slice(0, 100));
  }
  const w = document.documentElement.scrollWidth;
  if (w > window.innerWidth + 1) out.push("the page is " + w + " px wide in a " + window.innerWidth + " px window");
  return out;
})()`

// testAccessible: at 1280 and at 390 px, every page (signed in as admin,
// who sees every control, the policy editor opened) labels every control,
// names every button and link, and is no wider than the window.
func (s *suite) testAccessible(t *testing.T) {
	b := s.tab(t, "admin")
	b.signIn(s, 0, "admin", "/ui/")
	pages := []struct{ path, ready string }{
		{"/ui/", "#may"},
		{"/ui/approvals", "#approvals article"},
		{"/ui/in-doubt", "#in-doubt article"},
		{"/ui/intents?prefix=refund", "#results table"},
		{"/ui/intent?key=refund%3Aord_98231", "#timeline li"},
		{"/ui/intent?key=refund%3Aord_98232", "#decide article .why-not"}, // admin is not one of refunds' approvers
		{"/ui/audit", "#chain-verdict .notice.ok"},
		{"/ui/cluster", "#policies table"},
	}
	for _, width := range []int64{1280, 390} {
		b.do("resize", chromedp.EmulateViewport(width, 900))
		for _, p := range pages {
			b.goTo(s.nodes[0] + p.path)
			b.waitVisible(p.ready)
			if p.path == "/ui/cluster" {
				b.click(`button[aria-label="Edit policy refunds"]`)
				b.waitVisible(`#policy-editor textarea`)
			}
			for _, problem := range evalJS[[]string](b, a11yProblems) {
				t.Errorf("%s at %d px: %s", p.path, width, problem)
			}
		}
	}
}

// testAuthOff: a node with --auth=off (as make run starts it) needs no
// sign-in and says so in a banner; the person names the actor, and a
// rejection made in the browser is recorded under that name.
func testAuthOff(t *testing.T, browserCtx context.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard for the start
	defer cancel()
	c, err := localcluster.Start(ctx, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := strings.TrimPrefix(c.URLs()[0], "http://")
	b := newTab(t, browserCtx, "dev")
	b.goTo(c.URLs()[0] + "/ui/approvals")
	b.waitText("#banner", "Auth is off (development mode)")
	b.waitText("#approvals-count", "Nothing waits for approval in namespace default")
	if n := b.count("#sign-out"); n != 0 {
		t.Errorf("auth off shows a sign-out button")
	}
	send := func(method, path string, body any, want int) nodetest.Answer {
		t.Helper()
		a, err := nodetest.Send(method, addr, path, body)
		if err != nil || a.Code != want {
			t.Fatalf("%s %s = %d %v (%v), want %d", method, path, a.Code, a.Body, err, want)
		}
		return a
	}
	send("PUT", "/v1/policies/deploys", map[string]any{"tools": []string{"deploy.*"}, "require_approval": true}, 200)
	send("POST", "/v1/intents", map[string]any{"key": "deploy:v42", "tool": "deploy.prod", "owner": "ci/1", "payload": map[string]any{"version": "v42"}}, 202)
	c1 := card("deploy:v42")
	b.waitVisible(c1)
	b.fill(c1+` input[name="actor"]`, "ops-on-call")
	b.fill(c1+" input.reason", "freeze week")
	b.click(c1 + " button.reject")
	b.waitText(c1+" .result", "Rejected")
	trail := send("GET", "/v1/intents/deploy:v42/audit", nil, 200)
	events, _ := trail.Body["events"].([]any)
	last, _ := events[len(events)-1].(map[string]any)
	if last["op"] != "reject" || last["actor"] != "ops-on-call" || last["reason"] != "freeze week" {
		t.Errorf("the rejection made in the browser: %v", last)
	}
}

// testPolicyEdit: an admin edits a policy in the browser; a change made
// by someone else after the editor opened makes the save a refused
// compare-and-set (nothing saved, said clearly); edited again, it saves.
func (s *suite) testPolicyEdit(t *testing.T) {
	b := s.tab(t, "admin")
	b.signIn(s, 2, "admin", "/ui/cluster")
	edit := `button[aria-label="Edit policy quick"]`
	b.waitVisible(edit)
	b.click(edit)
	b.waitVisible("#policy-editor textarea")
	s.api(t, "admin", "PUT", "/v1/policies/quick", map[string]any{"tools": []string{"payments.quick"},
		"require_approval": true, "approvals_required": 1, "dedupe_window_ms": 1000, "priority": 1}, 200)
	mine := `{"tools":["payments.quick"],"require_approval":true,"approvals_required":1,"dedupe_window_ms":1000,"priority":5}`
	b.fill("#policy-editor textarea", mine)
	b.click(`#policy-editor button[type="submit"]`)
	b.waitText("#policy-editor", "Not saved: someone changed the policy since you opened it")
	if p := s.api(t, "reader", "GET", "/v1/policies/quick", nil, 200).Body["policy"].(map[string]any); p["priority"] != float64(1) {
		t.Fatalf("a refused save changed the policy: %v", p)
	}

	b.goTo(s.nodes[2] + "/ui/cluster")
	b.waitVisible(edit)
	b.click(edit)
	b.fill("#policy-editor textarea", mine)
	b.click(`#policy-editor button[type="submit"]`)
	b.waitText("#policy-editor", "Saved: quick is now version")
	if p := s.api(t, "reader", "GET", "/v1/policies/quick", nil, 200).Body["policy"].(map[string]any); p["priority"] != float64(5) {
		t.Fatalf("the save did not reach the policy: %v", p)
	}
}

// testIntentPage: an intent's own page (where the MCP gate sends an
// approver, /ui/intent?key=...) is where the decision is made: opened
// without a key it goes through the sign-in and back, shows the pending
// intent's card and records carol's approval; its timeline shows it.
func (s *suite) testIntentPage(t *testing.T) {
	b := s.tab(t, "carol")
	b.goTo(s.nodes[2] + "/ui/intent?key=" + url.QueryEscape("refund:ord_98232"))
	b.waitVisible("#sign-in-form")
	b.fill(`#sign-in-form input[name="key"]`, s.keys["carol"])
	b.click(`#sign-in-form button[type="submit"]`)
	c := "#decide " + card("refund:ord_98232")
	b.waitVisible(c)
	b.waitText(c+" .owner", "agent-7/refund:ord_98232")
	b.fill(c+" input.reason", "matches the return label")
	b.click(c + " button.approve")
	b.waitText(c+" .result", "Your approval is recorded")
	in := s.intent(t, "refund:ord_98232")
	approvals, _ := in["approvals"].([]any)
	if in["state"] != "pending_approval" || len(approvals) != 1 || approvals[0].(map[string]any)["actor"] != "carol" {
		t.Fatalf("after carol's approval on the intent's page: %v", in)
	}
	b.goTo(s.nodes[2] + "/ui/intent?key=" + url.QueryEscape("refund:ord_98232"))
	b.waitText("#timeline", "Approved by carol")
}

// claimAs is a claim by the named key (dave claims too); it returns the
// answer's intent.
func (s *suite) claimAs(t *testing.T, key, intentKey, tool string, payload map[string]any, want int) map[string]any {
	t.Helper()
	body := map[string]any{"key": intentKey, "tool": tool, "owner": key + "/" + intentKey, "payload": payload}
	return nodetest.IntentOf(s.api(t, key, "POST", "/v1/intents", body, want).Body)
}

// testControls: a card offers only the decisions the signed-in key may
// make now, and says why not the others: dave (agent and approver) may
// not approve his own claim (self_approval) but may reject it, may not
// decide under refunds (not one of its approvers), and alice, who
// approved, may not approve again. The API stays the authority: dave's
// approval sent anyway is refused 403, and the audit log shows that
// refusal as a refusal.
func (s *suite) testControls(t *testing.T) {
	s.claimAs(t, "dave", "quick:dave-1", "payments.quick", map[string]any{"amount": 5}, 202)
	refund := s.claimAs(t, "dave", "refund:ord_dave", "payments.refund", map[string]any{"order": "ord_dave", "amount": 700}, 202)
	s.api(t, "alice", "POST", "/v1/intents/refund:ord_dave/approve", map[string]any{"reason": "checked", "fingerprint": refund["fingerprint"]}, 200)
	own, other := card("quick:dave-1"), card("refund:ord_dave")

	dave := s.tab(t, "dave")
	dave.signIn(s, 0, "dave", "/ui/approvals")
	dave.waitState(own, "pending_approval")
	dave.waitState(other, "pending_approval")
	dave.waitText(own+" .why-not", "You claimed this intent")
	if got := dave.buttons(own); strings.Join(got, ",") != "reject" {
		t.Errorf("dave's own claim offers him %v, want reject only", got)
	}
	dave.waitText(other+" .why-not", "You are not an approver of policy refunds")
	if got := dave.buttons(other); len(got) != 0 {
		t.Errorf("a refunds intent offers dave, not one of its approvers, %v", got)
	}
	// The intent's own page (where the MCP gate sends an approver) says
	// the same.
	dave.goTo(s.nodes[0] + "/ui/intent?key=" + url.QueryEscape("quick:dave-1"))
	dave.waitText("#decide "+own+" .why-not", "You claimed this intent")
	if got := dave.buttons("#decide " + own); strings.Join(got, ",") != "reject" {
		t.Errorf("dave's own claim's page offers him %v, want reject only", got)
	}

	alice := s.tab(t, "alice")
	alice.signIn(s, 1, "alice", "/ui/approvals")
	alice.waitText(other+" .why-not", "You already approved this intent")
	if got := alice.buttons(other); strings.Join(got, ",") != "reject" {
		t.Errorf("the refund alice approved offers her %v, want reject only", got)
	}
	alice.waitState(own, "pending_approval")
	if got := alice.buttons(own); strings.Join(got, ",") != "approve,reject" {
		t.Errorf("dave's claim offers alice %v, want approve and reject", got)
	}

	// Sent anyway, from dave's page with his key, the approval is refused.
	head := s.auditHead(t)
	fp := s.intent(t, "quick:dave-1")["fingerprint"].(string)
	status := evalJS[int](dave, fmt.Sprintf(`fetch("/v1/intents/" + encodeURIComponent("quick:dave-1") + "/approve", {method: "POST",
		headers: {"Authorization": "Bearer " + sessionStorage.getItem("intentd.apiKey"), "Content-Type": "application/json"},
		body: JSON.stringify({reason: "mine", fingerprint: %s})}).then((r) => r.status)`, jsString(fp)))
	if status != 403 {
		t.Errorf("dave's approval of his own claim got %d, want 403 self_approval", status)
	}
	dave.goTo(fmt.Sprintf("%s/ui/audit?since=%d", s.nodes[0], head.LastSeq+1))
	row := `tr[data-status="self_approval"]`
	dave.waitVisible(row)
	if b := dave.text(row + " .badge.refusal"); b != "refused: self approval" {
		t.Errorf("the self_approval event's badge reads %q", b)
	}
	if n := dave.count(`tr:not(.refused) .badge.refusal`); n != 0 {
		t.Errorf("%d events that are not refusals have a refusal badge", n)
	}
}

// testDecidedElsewhere: decisions made elsewhere (by other keys, through
// the API) re-render the cards open in carol's tabs from the intent as it
// now stands, and take their controls away: a rejection, a purge, an
// approval on the intent's own page, a resolve of an in_doubt intent.
func (s *suite) testDecidedElsewhere(t *testing.T) {
	carol := s.tab(t, "carol")
	carol.signIn(s, 1, "carol", "/ui/approvals")
	carol.waitText("#live-status", "Live:")
	rej := s.claim(t, "refund:ord_77", "payments.refund", map[string]any{"order": "ord_77", "amount": 77}, 0, 202)
	gone := s.claim(t, "quick:77", "payments.quick", map[string]any{"amount": 77}, 0, 202)
	cr, cq := card("refund:ord_77"), card("quick:77")
	for _, c := range []string{cr, cq} {
		carol.waitState(c, "pending_approval")
		if got := carol.buttons(c); strings.Join(got, ",") != "approve,reject" {
			t.Fatalf("%s offers carol %v", c, got)
		}
	}
	s.api(t, "bob", "POST", "/v1/intents/refund:ord_77/reject", map[string]any{"reason": "duplicate order", "fingerprint": rej["fingerprint"]}, 200)
	carol.waitState(cr, "rejected")
	carol.waitText(cr+" .state-note", "Rejected")
	if got := carol.buttons(cr); len(got) != 0 {
		t.Errorf("the rejected intent's card offers %v", got)
	}
	// quick keeps a decided intent 1 s: rejected, it is purged.
	s.api(t, "bob", "POST", "/v1/intents/quick:77/reject", map[string]any{"reason": "typo", "fingerprint": gone["fingerprint"]}, 200)
	carol.waitState(cq, "purged")
	carol.waitText(cq+" .state-note", "Purged: the intent is gone")
	if got := carol.buttons(cq); len(got) != 0 {
		t.Errorf("the purged intent's card offers %v", got)
	}

	// The intent's own page follows it too.
	pend := s.claim(t, "quick:78", "payments.quick", map[string]any{"amount": 78}, 0, 202)
	page := s.tab(t, "carol-intent")
	page.signIn(s, 2, "carol", "/ui/intent?key="+url.QueryEscape("quick:78"))
	c := "#decide " + card("quick:78")
	page.waitState(c, "pending_approval")
	page.waitText("#live-status", "Live:")
	s.api(t, "bob", "POST", "/v1/intents/quick:78/approve", map[string]any{"reason": "fine", "fingerprint": pend["fingerprint"]}, 200)
	page.waitState(c, "approved")
	page.waitText(c+" .state-note", "Approved")
	page.waitText("h1 .state", "approved")
	if got := page.buttons(c); len(got) != 0 {
		t.Errorf("the approved intent's page offers %v", got)
	}

	// An in_doubt intent resolved by someone else.
	s.claim(t, "charge:order-19", "payments.charge", map[string]any{"order": "order-19", "amount": 1500, "currency": "usd"}, 100, 201)
	nodetest.WaitFor(t, 30*time.Second, "the lease to pass", func() bool { return s.intent(t, "charge:order-19")["state"] == "in_doubt" })
	carol.goTo(s.nodes[1] + "/ui/in-doubt")
	cd := card("charge:order-19")
	carol.waitState(cd, "in_doubt")
	carol.waitText("#live-status", "Live:")
	if got := carol.buttons(cd); strings.Join(got, ",") != "resolve" {
		t.Fatalf("the in_doubt card offers carol %v", got)
	}
	s.api(t, "alice", "POST", "/v1/intents/charge:order-19/resolve", map[string]any{"outcome": "executed", "reason": "found it", "result": map[string]any{"charge_id": "ch_19"}}, 200)
	carol.waitState(cd, "executed")
	carol.waitText(cd+" .state-note", "Resolved: executed")
	if got := carol.buttons(cd); len(got) != 0 {
		t.Errorf("the resolved intent's card offers %v", got)
	}
	carol.waitText(cd+" ol.timeline", "resolve")
}

// testPayloadWhole: a payload with long values and many keys is shown
// whole on the approvals page at 1280 and at 390 px: nothing cut at the
// right, nothing below the fold inside its box, and at 1280 px the card
// takes the whole row.
func (s *suite) testPayloadWhole(t *testing.T) {
	payload := map[string]any{"order": "ord_long", "amount": 120, "currency": "eur",
		"note":    strings.Repeat("customer-reported-damage-", 12) + "end",
		"address": "Flat 4, 221B Baker Street, Marylebone, London NW1 6XE, United Kingdom, care of the concierge desk on the ground floor"}
	for i := range 30 {
		payload[fmt.Sprintf("line_%02d", i)] = fmt.Sprintf("item %d: replacement part, quantity 1", i)
	}
	payload["zz_last"] = "the last key"
	s.claim(t, "refund:ord_long", "payments.refund", payload, 0, 202)
	b := s.tab(t, "alice")
	b.signIn(s, 0, "alice", "/ui/approvals")
	c := card("refund:ord_long")
	b.waitState(c, "pending_approval")
	for _, width := range []int64{1280, 390} {
		b.do("resize", chromedp.EmulateViewport(width, 900))
		box := evalJS[map[string]float64](b, fmt.Sprintf(`(() => { const p = document.querySelector(%s);
			return {sw: p.scrollWidth, cw: p.clientWidth, sh: p.scrollHeight, ch: p.clientHeight, w: p.getBoundingClientRect().width,
				page: document.documentElement.scrollWidth, win: window.innerWidth}; })()`, jsString(c+" pre.payload")))
		if box["sw"] > box["cw"]+1 {
			t.Errorf("at %d px the payload is cut at the right: %v px wide, %v px shown", width, box["sw"], box["cw"])
		}
		if box["sh"] > box["ch"]+1 {
			t.Errorf("at %d px part of the payload is below the fold of its box: %v px tall, %v px shown", width, box["sh"], box["ch"])
		}
		if width == 1280 && box["w"] < 1000 {
			t.Errorf("at 1280 px the payload box is %v px wide: its card should take the whole row", box["w"])
		}
		if box["page"] > box["win"]+1 {
			t.Errorf("at %d px the page is %v px wide", width, box["page"])
		}
	}
	b.do("resize", chromedp.EmulateViewport(1280, 900))
	b.waitText(c+" .covers", "The fingerprint covers the tool (payments.refund) and this payload")
	p := b.text(c + " pre.payload")
	for _, want := range []string{payload["note"].(string), payload["address"].(string), `"zz_last": "the last key"`} {
		if !strings.Contains(p, want) {
			t.Errorf("the payload shown lacks %q", want)
		}
	}
}
