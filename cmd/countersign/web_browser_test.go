package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"
)

// The browser tests drive a real headless Chromium against the real server.
// One browser serves the whole test binary; each person in a test gets a
// browser context of their own (separate cookies), closed with the test.

var sharedBrowser struct {
	once   sync.Once
	root   context.Context
	cancel func()
	err    error
}

// stopBrowser ends the shared browser; TestMain calls it after the tests.
func stopBrowser() {
	if sharedBrowser.cancel != nil {
		sharedBrowser.cancel()
	}
}

// chromiumPath finds Chromium: $COUNTERSIGN_CHROMIUM, else /usr/bin/chromium,
// else chromium or google-chrome on the PATH.
func chromiumPath() string {
	if p := os.Getenv("COUNTERSIGN_CHROMIUM"); p != "" {
		return p
	}
	if fileExists("/usr/bin/chromium") {
		return "/usr/bin/chromium"
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// needBrowser skips the test when no Chromium is found, except in CI
// (CI=true), where a missing browser fails the test.
func needBrowser(t *testing.T) {
	t.Helper()
	if chromiumPath() != "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium found and CI=true: the browser tests must run in CI (apt-get install chromium, or set COUNTERSIGN_CHROMIUM)")
	}
	t.Skip("no Chromium found: skipping the browser test (apt-get install chromium, or set COUNTERSIGN_CHROMIUM); CI never skips it")
}

// person opens a fresh browser context (its own cookies) in the shared
// browser and returns it.
func person(t *testing.T) context.Context {
	t.Helper()
	needBrowser(t)
	sharedBrowser.once.Do(func() {
		dir, err := os.MkdirTemp("", "countersign-chromium-")
		if err != nil {
			sharedBrowser.err = err
			return
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(chromiumPath()),
			chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.Flag("disable-background-timer-throttling", true),
			chromedp.Flag("disable-backgrounding-occluded-windows", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1280, 900),
		)
		root, cancelRoot := chromedp.NewContext(alloc)
		sharedBrowser.root = root
		sharedBrowser.cancel = func() { cancelRoot(); cancelAlloc(); os.RemoveAll(dir) }
		_, sharedBrowser.err = chromedp.Run(root, chromedp.Navigate("about:blank"))
	})
	if sharedBrowser.err != nil {
		t.Fatalf("starting Chromium: %v", sharedBrowser.err)
	}
	ctx, cancel := chromedp.NewContext(sharedBrowser.root, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("opening a browser context: %v", err)
	}
	return ctx
}

// browse runs actions in the person's tab with a bound on the wait.
func browse(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, pageDump(ctx))
	}
}

// pageDump is the tab's location and HTML, for a failure message.
func pageDump(ctx context.Context) string {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(c, chromedp.Location())
	html, _ := chromedp.Run(c, chromedp.OuterHTML(chromedp.CSS("html")))
	return "at " + loc + ":\n" + html
}

// read returns one value from the person's tab.
func read[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// webLink runs `countersign web link` and returns the URL it printed,
// rebased onto the running server (the config listens on port 0).
func (e *testEnv) webLink(name string) string {
	e.t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"web", "link", "--config", e.cfg, "--name", name}, e.getenv, strings.NewReader(""), &out, &errb); err != nil {
		e.t.Fatalf("web link %s: %v (%s)", name, err, errb.String())
	}
	u, err := url.Parse(strings.TrimSpace(out.String()))
	if err != nil || u.Path != "/ui/signin/link" || u.Query().Get("t") == "" || strings.Contains(out.String()[:len(out.String())-1], "\n") {
		e.t.Fatalf("web link printed %q, want one sign-in URL", out.String())
	}
	return u.RequestURI()
}

// signInWithLink opens a one-time link in the person's browser and presses
// Continue; it returns once the inbox shows.
func signInWithLink(t *testing.T, ctx context.Context, base, link, name string) {
	t.Helper()
	browse(t, ctx, "open the sign-in link of "+name,
		chromedp.Navigate(base+link),
		chromedp.WaitVisible(chromedp.CSS("#continue")),
		chromedp.Click(chromedp.CSS("#continue")),
		chromedp.WaitVisible(chromedp.CSS("h1")),
		chromedp.WaitVisible(chromedp.CSS(".me")),
	)
	if me := read(t, ctx, "who is signed in", chromedp.Text(chromedp.CSS(".me"))); !strings.HasPrefix(me, name) {
		t.Fatalf("signed in as %q, want %s", me, name)
	}
}

// webConfig is the Slack end-to-end config with two more people: a viewer
// who signs in through the console only, and the web identity of dr_smith.
func webConfig(f *slackFake) string {
	return strings.Replace(slackConfig(f, "http"), "    slack: U0123ABC\n", "    slack: U0123ABC\n    web: dr.smith@hospital.example\n", 1) +
		"  - name: nurse_v\n    role: viewer\n    web: nurse.v@hospital.example\n"
}

// TestWebConsoleInBrowser signs people in through one-time links in a real
// browser and decides from the pages: dr_smith approves a memory proposal
// (it leaves the inbox, and the Slack card is updated in place) and rejects
// an action with a reason; a viewer and an out-of-scope member see the same
// items read-only, with why; a form without its CSRF token is refused; a
// revoked principal's open session is signed out; an agent cannot get a link.
func TestWebConsoleInBrowser(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, webConfig(f))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("intake", "agent")
	admin := e.CreateKey("root", "admin")
	e.CreateKey("dr_out", "member", "--scopes", "patient_9", "--kind", "person")
	e.CreateKey("ward_bot", "member", "--kind", "agent")

	// An agent-kind principal gets no link, even with a role that approves.
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"web", "link", "--config", e.cfg, "--name", "ward_bot"}, e.getenv, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "only people sign in") || out.Len() != 0 {
		t.Fatalf("web link for an agent: %v, printed %q; want a refusal", err, out.String())
	}
	outLink := e.webLink("dr_out") // a stored principal: minted while the server is stopped
	e.Start()

	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "full code", "text": "She is full code."})
	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "DNR <script>alert(1)</script>", "text": "Make her DNR", "source": "ward round", "confidence": 0.9})
	act := e.MustOK(agent, "confirm_action", actDelete(""))
	reqID, _ := act.Data["request_id"].(string)
	waitFor(t, "both items to be posted to Slack", func() bool { return len(f.Calls("chat.postMessage")) == 2 })

	// dr_smith signs in with a one-time link and sees both items.
	doc := person(t)
	link := e.webLink("dr_smith")
	signInWithLink(t, doc, e.URL, link, "dr_smith")
	inbox := read(t, doc, "the inbox", chromedp.Text(chromedp.CSS("#items")))
	if !strings.Contains(inbox, "memory change") || !strings.Contains(inbox, "⚠ cannot be undone I will delete the prod database.") || strings.Contains(inbox, "read-only") {
		t.Fatalf("dr_smith's inbox, want %q and %q, and no %q:\n%s", "memory change", "⚠ cannot be undone I will delete the prod database.", "read-only", inbox)
	}
	if n := read(t, doc, "the count", chromedp.Text(chromedp.CSS("#decidable"))); n != "2" {
		t.Errorf("decidable count %q, want 2", n)
	}
	// The link worked once: a second use is refused.
	other := person(t)
	browse(t, other, "reuse the link", chromedp.Navigate(e.URL+link), chromedp.WaitVisible(chromedp.CSS("#continue")), chromedp.Click(chromedp.CSS("#continue")), chromedp.WaitVisible(chromedp.CSS(".problem")))
	if msg := read(t, other, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(msg, "already used") {
		t.Errorf("second use of a link: %q, want it to contain %q", msg, "already used")
	}

	// Open the memory proposal: current -> proposed, escaped; approve it.
	browse(t, doc, "open the proposal",
		chromedp.Click(chromedp.CSS(`li[data-kind="memory_change"] a`)),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
	)
	if cur, prop := read(t, doc, "current", chromedp.Text(chromedp.CSS("#current"))), read(t, doc, "proposed", chromedp.Text(chromedp.CSS("#proposed"))); cur != "full code" || prop != "DNR <script>alert(1)</script>" {
		t.Fatalf("diff shows %q -> %q, want %q -> %q", cur, prop, "full code", "DNR <script>alert(1)</script>")
	}
	browse(t, doc, "approve", chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	if n := read(t, doc, "the notice", chromedp.Text(chromedp.CSS(".notice"))); !strings.HasPrefix(n, "Approved #") {
		t.Fatalf("after approving: %q, want a notice starting %q", n, "Approved #")
	}
	if inbox := read(t, doc, "the inbox", chromedp.Text(chromedp.CSS("#items"))); strings.Contains(inbox, "memory change") || !strings.Contains(inbox, "I will delete the prod database.") {
		t.Fatalf("the approved proposal is still in the inbox, want no %q, with %q still listed:\n%s", "memory change", "I will delete the prod database.", inbox)
	}
	waitFor(t, "the Slack card to be updated", func() bool { return len(f.Calls("chat.update")) >= 1 })
	if ub := slackJSON(f.Calls("chat.update")[0].Form.Get("blocks")); !strings.Contains(ub, "*Approved* by dr_smith") || strings.Contains(ub, `"actions"`) {
		t.Fatalf("the Slack card after a web approval, want %q and no %q:\n%s", "*Approved* by dr_smith", `"actions"`, ub)
	}
	if r := e.MustOK(agent, "check_before_act", map[string]any{"subject": "code_status"}); !strings.Contains(r.Text, "code_status = DNR") {
		t.Errorf("after approval the memory reads: %s, want it to contain %q", r.Text, "code_status = DNR")
	}

	// Reject the action with a reason.
	browse(t, doc, "open the action",
		chromedp.Navigate(e.URL+"/ui/"),
		chromedp.Click(chromedp.CSS(`li[data-kind="action"] a`)),
		chromedp.WaitVisible(chromedp.CSS("#reject")),
	)
	if args := read(t, doc, "the arguments", chromedp.Text(chromedp.CSS("#args"))); args != "db_name\nprod" {
		t.Errorf("arguments shown: %q, want %q", args, "db_name\nprod")
	}
	browse(t, doc, "reject with a reason",
		chromedp.SendKeys(chromedp.CSS("#reason"), "wrong database: use staging"),
		chromedp.Click(chromedp.CSS("#reject")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID})
	if reason, _ := st.Data["reason"].(string); st.Data["status"] != "denied" || !strings.Contains(reason, "wrong database: use staging") {
		t.Fatalf("action after the web rejection: %s, want status denied with a reason containing %q", st, "wrong database: use staging")
	}

	// The decided item's page shows the outcome; a form without its CSRF
	// token is refused and changes nothing.
	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "full code", "text": "Back to full code"})
	browse(t, doc, "reload the inbox", chromedp.Navigate(e.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`li[data-kind="memory_change"]`)))
	id := read(t, doc, "the new item's id", chromedp.AttributeValue(chromedp.CSS(`li[data-kind="memory_change"]`), "id")).Value
	id = strings.TrimPrefix(id, "item-")
	status := read(t, doc, "a forged POST", chromedp.Evaluate[int](`fetch("/ui/items/`+id+`/decide", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "action=approve"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if status != 403 {
		t.Fatalf("decision without a CSRF token answered %d, want 403", status)
	}
	if r := e.MustOK(agent, "pending_changes", map[string]any{}); !strings.Contains(r.Text, "Back to full code") && !strings.Contains(r.Text, "full code") {
		t.Fatalf("the proposal is no longer pending after a refused POST: %s, want %q or %q in it", r.Text, "Back to full code", "full code")
	}

	// A viewer sees the pending item read-only, with why, and no buttons.
	nurse := person(t)
	signInWithLink(t, nurse, e.URL, e.webLink("nurse_v"), "nurse_v")
	if why := read(t, nurse, "the viewer's row", chromedp.Text(chromedp.CSS("#item-"+id+" .why"))); !strings.Contains(why, "needs role member or admin") {
		t.Errorf("viewer's row: %q, want it to contain %q", why, "needs role member or admin")
	}
	browse(t, nurse, "open the item as the viewer", chromedp.Navigate(e.URL+"/ui/items/"+id), chromedp.WaitVisible(chromedp.CSS("#readonly")))
	if n := read(t, nurse, "buttons", chromedp.Evaluate[int](`document.querySelectorAll("#approve, #reject").length`)); n != 0 {
		t.Errorf("the viewer's page has %d decision buttons, want none", n)
	}

	// An out-of-scope member is not shown the item at all (issue 19.5),
	// and its page withholds everything.
	outside := person(t)
	signInWithLink(t, outside, e.URL, outLink, "dr_out")
	if n := read(t, outside, "the out-of-scope rows", chromedp.Evaluate[int](`document.querySelectorAll("#item-`+id+`").length`)); n != 0 {
		t.Errorf("the out-of-scope item is listed (%d rows), want none", n)
	}
	browse(t, outside, "open the item out of scope", chromedp.Navigate(e.URL+"/ui/items/"+id), chromedp.WaitVisible(chromedp.CSS("#withheld")))
	if n := read(t, outside, "the out-of-scope page's kind and status", chromedp.Evaluate[int](`document.querySelectorAll(".kind, #status").length`)); n != 0 {
		t.Errorf("the out-of-scope page shows its kind or status (%d elements), want none", n)
	}

	// Revoking dr_out ends the open session at once.
	list := e.MustOK(admin, "list_principals", nil)
	var outID string
	ps, _ := list.Data["principals"].([]any)
	for _, p := range ps {
		if m, _ := p.(map[string]any); m["name"] == "dr_out" {
			outID, _ = m["id"].(string)
		}
	}
	if outID == "" {
		t.Fatalf("dr_out is not in list_principals: %s", list)
	}
	e.MustOK(admin, "revoke_principal", map[string]any{"principal_id": outID})
	browse(t, outside, "reload after revocation", chromedp.Navigate(e.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("h1")))
	if loc := read(t, outside, "where the revoked session lands", chromedp.Location()); !strings.Contains(loc, "/ui/signin") {
		t.Fatalf("a revoked principal's session still opens %s, want a location with %q", loc, "/ui/signin")
	}

	// The viewer's open item page reloads itself when dr_smith decides the
	// item in another session (the page's poll; deciding needs no script).
	browse(t, doc, "approve from dr_smith's session",
		chromedp.Navigate(e.URL+"/ui/items/"+id),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	browse(t, nurse, "the viewer's page refreshes itself", chromedp.WaitVisible(chromedp.CSS("#status.status-approved")))
	if n := read(t, nurse, "the read-only note", chromedp.Evaluate[int](`document.querySelectorAll("#readonly").length`)); n != 0 {
		t.Error("the refreshed page still says the item awaits a decision")
	}

	// The audit page, for an admin-less member, is the space's trail.
	browse(t, doc, "open the audit log", chromedp.Navigate(e.URL+"/ui/audit?space=default"), chromedp.WaitVisible(chromedp.CSS("table.audit")))
	trail := read(t, doc, "the trail", chromedp.Text(chromedp.CSS("table.audit")))
	if !strings.Contains(trail, "confirm_change") || !strings.Contains(trail, "dr_smith") {
		t.Errorf("audit trail of space default, want %q and %q in it:\n%s", "confirm_change", "dr_smith", trail)
	}
	browse(t, doc, "verify the chain", chromedp.Click(chromedp.CSS("#verify")), chromedp.WaitVisible(chromedp.CSS("#verify-result")))
	if v := read(t, doc, "the verdict", chromedp.Text(chromedp.CSS("#verify-result"))); !strings.Contains(v, "INTACT") {
		t.Errorf("verify chain: %q, want it to contain %q", v, "INTACT")
	}
}

// TestWebOIDCSignInInBrowser runs a real OpenID Connect provider on
// loopback and signs in through the whole authorization-code flow in the
// browser (state, nonce, PKCE): the email claim maps to principals[].web.
// An account that maps to no principal is refused.
func TestWebOIDCSignInInBrowser(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	e := newTestEnv(t, `principals:
  - name: dr_smith
    role: member
    web: Dr.Smith@hospital.example
web:
  oidc:
    issuer: `+m.Issuer()+`
    client_id: `+m.ClientID+`
    client_secret_env: OIDC_SECRET
`)
	e.env["OIDC_SECRET"] = m.ClientSecret
	admin := e.CreateKey("root", "admin")
	e.Start()

	m.QueueUser(&mockoidc.MockUser{Subject: "u-1", Email: "dr.smith@hospital.example", EmailVerified: true, PreferredUsername: "drsmith"})
	doc := person(t)
	browse(t, doc, "sign in through the identity provider",
		chromedp.Navigate(e.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/signin/oidc"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/ui/signin/oidc"]`)),
		chromedp.WaitVisible(chromedp.CSS(".me")),
	)
	if me := read(t, doc, "who is signed in", chromedp.Text(chromedp.CSS(".me"))); !strings.HasPrefix(me, "dr_smith") {
		t.Fatalf("signed in as %q, want dr_smith", me)
	}
	if loc := read(t, doc, "where the sign-in lands", chromedp.Location()); !strings.HasSuffix(loc, "/ui/") {
		t.Errorf("after OIDC sign-in the browser is at %s, want the inbox", loc)
	}

	m.QueueUser(&mockoidc.MockUser{Subject: "u-2", Email: "stranger@elsewhere.example", EmailVerified: true})
	stranger := person(t)
	browse(t, stranger, "an unmapped account signs in",
		chromedp.Navigate(e.URL+"/ui/signin/oidc"),
		chromedp.WaitVisible(chromedp.CSS(".problem")),
	)
	if msg := read(t, stranger, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(msg, "stranger@elsewhere.example is not mapped to a Countersign principal") {
		t.Errorf("unmapped account: %q, want it to contain %q", msg, "stranger@elsewhere.example is not mapped to a Countersign principal")
	}
	if n := read(t, stranger, "signed-in marker", chromedp.Evaluate[int](`document.querySelectorAll(".me").length`)); n != 0 {
		t.Error("an unmapped account was signed in")
	}
	audit := e.MustOK(admin, "audit_log", map[string]any{})
	if !strings.Contains(audit.Text, "web_sign_in") || !strings.Contains(audit.Text, "via oidc") {
		t.Errorf("the OIDC sign-in is not audited, want %q and %q in the log:\n%s", "web_sign_in", "via oidc", audit.Text)
	}
}
