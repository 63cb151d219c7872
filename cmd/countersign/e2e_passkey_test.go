package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/internal/nodetest"
	"github.com/oauth2-proxy/mockoidc"
)

func passkeyConfig(f *slackFake, m *mockoidc.MockOIDC) string {
	return `slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + f.srv.GetAPIURL() + `
  channels: {default: C0DEFAULT}
tools:
  - name: order_medication
    category: mutating
    approvers: {roles: [member]}
    step_up: {method: passkey}
  - name: restart_service
    category: mutating
    approvers: {roles: [member]}
    step_up: {method: oidc_step_up}
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
    web: dr.smith@hospital.example
    email: dr.smith@hospital.example
  - name: ops_admin
    role: admin
    web: ops.admin@hospital.example
web:
  oidc:
    issuer: ` + m.Issuer() + `
    client_id: ` + m.ClientID + `
    client_secret_env: OIDC_SECRET
  passkeys: {rp_id: localhost}
scim: {token_env: COUNTERSIGN_SCIM_TOKEN}
`
}

// virtualAuthenticator adds a DevTools virtual authenticator (the CDP
// WebAuthn domain) to the person's tab: a platform authenticator with
// resident keys that verifies its user, as a laptop's fingerprint reader.
func virtualAuthenticator(t *testing.T, ctx context.Context) webauthn.AuthenticatorID {
	t.Helper()
	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	res, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal,
		HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
		// The CDP client always sends a credential's
		// generateCmtgKeyOnNextOperation (false), which Chromium
		// 156.0.8078.114 refuses in WebAuthn.addCredential unless the
		// authenticator supports the cmtgKey extension; the console
		// never asks for it, so supporting it changes no ceremony.
		HasCmtgKey: true,
	}})
	if err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	return res.AuthenticatorID
}

// authenticatorCredentials are the credentials the virtual authenticator holds.
func authenticatorCredentials(t *testing.T, ctx context.Context, id webauthn.AuthenticatorID) []*webauthn.Credential {
	t.Helper()
	res, err := chromedp.Call(ctx, webauthn.GetCredentials, webauthn.GetCredentialsParams{AuthenticatorID: id})
	if err != nil {
		t.Fatalf("WebAuthn.getCredentials: %v", err)
	}
	return res.Credentials
}

// TestPasskeyStepUpInBrowser: passkeys for step-up against the real
// server, Slack on a fake, a real OIDC provider on loopback and Chromium
// with a DevTools virtual authenticator (no mock of WebAuthn anywhere):
//   - registering a passkey from a session opened with a sign-in link, and
//     from one whose OIDC sign-in is ten minutes old, is refused with the
//     reason (audited; the authenticator holds nothing); after "Sign in
//     again" at the provider it is registered (audited);
//   - order_medication requires a passkey: the page offers it and no
//     Approve, and an approval forced with the OIDC step-up alone is
//     refused by the one rule ("decided with OIDC step-up");
//   - the passkey step-up (user verified) approves it: the vote and the
//     receipt say passkey, the Slack card "by dr_smith (passkey)", the
//     audit the use with the authenticator's sign count;
//   - the step-up was for that item only: a second one still asks for the
//     passkey, while restart_service (oidc_step_up) is approved with the
//     fresh OIDC sign-in as before;
//   - by hand: a challenge for one item is refused for another, an
//     assertion posted twice is used once, a passkey whose counter went
//     back (copied) is refused, and a principal deactivated by the
//     directory (SCIM) or suspended by an admin begins no passkey step-up;
//   - dr_smith removes their passkey and registers another, which an
//     admin removes (each audited); the next item then offers none.
func TestPasskeyStepUpInBrowser(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	f := newSlackFake(t)
	m, _ := stepUpProvider(t)
	e := newTestEnv(t, passkeyConfig(f, m))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"], e.env["OIDC_SECRET"] = "xoxb-e2e", e2eSlackSecret, m.ClientSecret
	e.env["COUNTERSIGN_SCIM_TOKEN"] = e2eSCIMToken
	agent := e.CreateKey("ward_bot", "agent")
	admin := e.CreateKey("root", "admin")
	e.Start()
	// A passkey's relying party is a domain name: the console at localhost.
	base := strings.Replace(e.URL, "127.0.0.1", "localhost", 1)
	smithUser := func(at time.Time) stepUpUser {
		return stepUpUser{&mockoidc.MockUser{Subject: "u-smith", Email: "dr.smith@hospital.example", EmailVerified: true}, at}
	}

	// 1. No fresh OIDC sign-in: a link session, then a stale OIDC one.
	smith := person(t)
	auth := virtualAuthenticator(t, smith)
	signInWithLink(t, smith, base, e.webLink("dr_smith"), "dr_smith")
	tryRegister := func(what string) string {
		t.Helper()
		browse(t, smith, what,
			chromedp.Navigate(base+"/ui/passkeys"),
			chromedp.WaitVisible(chromedp.CSS("#passkey-add")),
			chromedp.SendKeys(chromedp.CSS("#passkey-label"), "work laptop"),
			chromedp.Click(chromedp.CSS("#passkey-add")),
			chromedp.WaitVisible(chromedp.CSS("#passkey-problem")),
		)
		return read(t, smith, "the refusal", chromedp.Text(chromedp.CSS("#passkey-problem")))
	}
	if msg := tryRegister("register a passkey from a link session"); !strings.Contains(msg, "Adding a passkey needs a fresh sign-in at your identity provider (OIDC) within the last 5 minutes") || !strings.Contains(msg, "Nothing was registered") {
		t.Fatalf("registering from a link session: got %q, want the fresh sign-in refusal", msg)
	}
	m.QueueUser(smithUser(time.Now().Add(-10 * time.Minute)))
	browse(t, smith, "sign in at the provider, ten minutes ago", chromedp.Navigate(base+"/ui/signin/oidc"), chromedp.WaitVisible(chromedp.CSS(".me")))
	if msg := tryRegister("register a passkey from a stale OIDC session"); !strings.Contains(msg, "Adding a passkey needs a fresh sign-in") {
		t.Fatalf("registering from a stale OIDC session: got %q, want the fresh sign-in refusal", msg)
	}
	if creds := authenticatorCredentials(t, smith, auth); len(creds) != 0 {
		t.Fatalf("after the refused registrations the authenticator holds %d credentials, want 0", len(creds))
	}
	if n := read(t, smith, "listed passkeys", chromedp.Evaluate[int](`document.querySelectorAll(".passkey-row").length`)); n != 0 {
		t.Fatalf("after the refused registrations the page lists %d passkeys, want 0", n)
	}
	audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 100})
	if got := strings.Count(audit.Text, "web: passkey refused: Adding a passkey needs a fresh sign-in"); got != 2 {
		t.Fatalf("refused registrations audited %d times, want 2:\n%s", got, audit.Text)
	}

	// 2. Sign in again at the provider, then register.
	m.QueueUser(smithUser(time.Now()))
	browse(t, smith, "sign in again and register",
		chromedp.Navigate(base+"/ui/passkeys"),
		chromedp.Click(chromedp.CSS("#passkey-signin")),
		chromedp.WaitVisible(chromedp.CSS("#register-fresh")),
		chromedp.SendKeys(chromedp.CSS("#passkey-label"), "work laptop"),
		chromedp.Click(chromedp.CSS("#passkey-add")),
		chromedp.WaitVisible(chromedp.CSS("#my-passkeys")),
	)
	if n := read(t, smith, "listed passkeys", chromedp.Evaluate[int](`document.querySelectorAll("#my-passkeys .passkey-row").length`)); n != 1 {
		t.Fatalf("after registering the page lists %d passkeys, want 1\n%s", n, pageDump(smith))
	}
	creds := authenticatorCredentials(t, smith, auth)
	if len(creds) != 1 || creds[0].RpID != "localhost" {
		t.Fatalf("the authenticator holds %+v, want one credential for localhost", creds)
	}
	count0 := creds[0].SignCount
	axe, err := os.ReadFile(filepath.Join(nodetest.Modules(t, "axe-core"), "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	accessible := func(where string) {
		t.Helper()
		for _, v := range axeRun(t, smith, string(axe)) {
			t.Errorf("%s: %s (%s): %s\n  %s", where, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
		}
	}
	accessible("the Passkeys page with a passkey")
	audit = e.MustOK(admin, "audit_log", map[string]any{"limit": 100})
	if !regexp.MustCompile(`passkey_registered .* web: dr_smith registered passkey "work laptop" \(id [A-Za-z0-9_-]{12}…\) after an OIDC sign-in at \d{4}-`).MatchString(audit.Text) {
		t.Fatalf("the registration is not audited:\n%s", audit.Text)
	}

	// 3. A passkey item: the fresh OIDC step-up is not enough.
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "warfarin", "dose_mg": 5}})
	reqID, item := r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"])
	waitFor(t, "the card", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	if b := slackJSON(f.Calls("chat.postMessage")[0].Form.Get("blocks")); !strings.Contains(b, "approving needs a passkey step-up (within 5 minutes)") {
		t.Fatalf("the card does not say it needs a passkey:\n%s", b)
	}
	browse(t, smith, "open the passkey item", chromedp.Navigate(base+"/ui/items/"+item), chromedp.WaitVisible(chromedp.CSS("#passkey-stepup")), chromedp.WaitVisible(chromedp.CSS("#passkey-note")))
	if n := read(t, smith, "approve buttons", chromedp.Evaluate[int](`document.querySelectorAll("#approve, #stepup").length`)); n != 0 {
		t.Fatal("a passkey item offers Approve or the OIDC step-up to a session without a passkey step-up")
	}
	accessible("a passkey item's page")
	forced := read(t, smith, "an approval forced with the OIDC step-up", chromedp.Evaluate[string](`fetch("/ui/items/`+item+`/decide", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
		body: "action=approve&nonce=forced&csrf=" + encodeURIComponent(document.querySelector('form.reject input[name="csrf"]').value)}).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if !strings.Contains(forced, "is approved only with a fresh passkey step-up in the console") || !strings.Contains(forced, "decided with OIDC step-up") {
		t.Fatalf("an approval with the OIDC step-up alone: the page says\n%s\nwant %q and %q", forced, "is approved only with a fresh passkey step-up in the console", "decided with OIDC step-up")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" || len(voteAssurances(st.Data)) != 0 {
		t.Fatalf("after the forced approval: %s, want pending with no votes", st)
	}

	// 4. The passkey step-up, then Approve.
	browse(t, smith, "step up with the passkey and approve",
		chromedp.Click(chromedp.CSS("#passkey-stepup")),
		chromedp.WaitVisible(chromedp.CSS("#stepped-up")),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID})
	if got := voteAssurances(st.Data); st.Data["status"] != "approved" || len(got) != 1 || got[0] != "passkey" {
		t.Fatalf("after the passkey approval: votes %v (%s), want approved with passkey", got, st)
	}
	if a := receiptAssurance(t, st.Data); a != "passkey" {
		t.Fatalf("the receipt's assurance %q, want passkey", a)
	}
	creds = authenticatorCredentials(t, smith, auth)
	if len(creds) != 1 || creds[0].SignCount <= count0 {
		t.Fatalf("the authenticator's sign count %v after the step-up, want above %v", creds, count0)
	}
	audit = e.MustOK(admin, "audit_log", map[string]any{"limit": 100})
	if !regexp.MustCompile(fmt.Sprintf(`passkey_used .* web: dr_smith stepped up with passkey "work laptop" \(id [A-Za-z0-9_-]{12}…, user verified, sign count %d\) for #%s`, int(creds[0].SignCount), item)).MatchString(audit.Text) {
		t.Fatalf("the passkey's use is not audited with its sign count %v:\n%s", creds[0].SignCount, audit.Text)
	}
	if !regexp.MustCompile(reqID + ` by dr_smith \[web:dr_smith\] step-up passkey auth_time=\d{4}-`).MatchString(audit.Text) {
		t.Fatalf("the approval's audit entry does not record the passkey step-up:\n%s", audit.Text)
	}
	waitFor(t, "the card's update", func() bool {
		for _, c := range f.Calls("chat.update") {
			if strings.Contains(slackJSON(c.Form.Get("blocks")), "*Approved* by dr_smith (passkey) on") {
				return true
			}
		}
		return false
	})

	// 5. The step-up was for that item: the next passkey item asks again;
	// an oidc_step_up item is approved with the fresh OIDC sign-in.
	r2 := e.MustOK(agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "heparin", "dose_mg": 1}})
	item2 := fmt.Sprint(r2.Data["item_id"])
	browse(t, smith, "open the second passkey item", chromedp.Navigate(base+"/ui/items/"+item2), chromedp.WaitVisible(chromedp.CSS("#passkey-stepup")))
	if n := read(t, smith, "approve buttons", chromedp.Evaluate[int](`document.querySelectorAll("#approve").length`)); n != 0 {
		t.Fatal("a passkey step-up for one item opened Approve on another")
	}
	r3 := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "pharmacy-api"}})
	req3, item3 := r3.Data["request_id"].(string), fmt.Sprint(r3.Data["item_id"])
	browse(t, smith, "the oidc_step_up item with the passkey",
		chromedp.Navigate(base+"/ui/items/"+item3),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	if got := voteAssurances(e.MustOK(agent, "action_status", map[string]any{"request_id": req3}).Data); len(got) != 1 || got[0] != "oidc_step_up" {
		t.Fatalf("the oidc_step_up item approved with the fresh OIDC sign-in: votes %v, want oidc_step_up", got)
	}

	// 6. The ceremony by hand, with the browser's own WebAuthn: a
	// challenge begun for one item is refused for another, and an
	// assertion is used once (the replay finds no open challenge).
	r4 := e.MustOK(agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "insulin", "dose_mg": 2}})
	item4 := fmt.Sprint(r4.Data["item_id"])
	browse(t, smith, "open the fourth item", chromedp.Navigate(base+"/ui/items/"+item4), chromedp.WaitVisible(chromedp.CSS("#passkey-stepup")))
	got := read(t, smith, "a challenge for one item, answered to another, then replayed", chromedp.Evaluate[[]string](passkeyByHand(item2, item4, 1), chromedp.EvalAwaitPromise))
	if len(got) != 1 || !strings.Contains(got[0], "That passkey answer was asked for something else") {
		t.Fatalf("an assertion for #%s posted to #%s: the page says\n%v\nwant one page saying %q", item2, item4, got, "That passkey answer was asked for something else")
	}
	got = read(t, smith, "an assertion posted twice", chromedp.Evaluate[[]string](passkeyByHand(item4, item4, 2), chromedp.EvalAwaitPromise))
	if len(got) != 2 || !strings.Contains(got[0], `id="stepped-up"`) || !strings.Contains(got[1], "No passkey request is open in this session") {
		t.Fatalf("an assertion posted twice: the pages say\n%v\nwant two: the first with %q, the second saying %q", got, `id="stepped-up"`, "No passkey request is open in this session")
	}

	// 7. A copied passkey: the authenticator's counter set back is refused.
	creds = authenticatorCredentials(t, smith, auth)
	c := *creds[0]
	if _, err := chromedp.Call(smith, webauthn.RemoveCredential, webauthn.RemoveCredentialParams{AuthenticatorID: auth, CredentialID: c.CredentialID}); err != nil {
		t.Fatal(err)
	}
	c.SignCount = 0
	// Chromium 156.0.8078.114 reports activeCmtgKeyIndex 0 beside no
	// cmtgKeys and refuses that back in addCredential; no key was made.
	c.CmtgKeys, c.ActiveCmtgKeyIndex = nil, nil
	if _, err := chromedp.Call(smith, webauthn.AddCredential, webauthn.AddCredentialParams{AuthenticatorID: auth, Credential: &c}); err != nil {
		t.Fatal(err)
	}
	browse(t, smith, "step up with a passkey whose counter went back",
		chromedp.Navigate(base+"/ui/items/"+item2),
		chromedp.Click(chromedp.CSS("#passkey-stepup")),
		chromedp.WaitVisible(chromedp.CSS(".problem")),
	)
	if msg := read(t, smith, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(msg, "signature counter went backwards") {
		t.Fatalf("a passkey whose sign count went back: got %q, want the counter refusal", msg)
	}
	if n := read(t, smith, "approve buttons", chromedp.Evaluate[int](`document.querySelectorAll("#approve").length`)); n != 0 {
		t.Fatal("a passkey whose sign count went back opened Approve")
	}

	// 8. Deactivated by the directory (SCIM), then suspended by an admin,
	// dr_smith's passkey steps nobody up: the console refuses the session
	// before any passkey is asked.
	refused := func(why string) {
		t.Helper()
		status := read(t, smith, "a passkey step-up begun "+why, chromedp.Evaluate[int](`fetch("/ui/items/`+item2+`/passkey/begin", {method: "POST", redirect: "manual", body: new URLSearchParams({csrf: document.querySelector('input[name="csrf"]').value})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
		if status != 401 {
			t.Fatalf("a passkey step-up begun %s answered %d, want 401 (the session ended)", why, status)
		}
		browse(t, smith, "the item "+why, chromedp.Navigate(base+"/ui/items/"+item2), chromedp.WaitVisible(chromedp.CSS("h1")))
		if n := read(t, smith, "passkey buttons", chromedp.Evaluate[int](`document.querySelectorAll("#passkey-stepup, #approve, .me").length`)); n != 0 {
			t.Fatalf("the session of a principal %s still shows the item's step-up", why)
		}
	}
	scim := e.URL + "/scim/v2"
	st2, user := scimDo(t, scim, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"dr.smith@hospital.example","active":true}`))
	if st2 != http.StatusCreated {
		t.Fatalf("SCIM create: %d %v, want %d", st2, user, http.StatusCreated)
	}
	setActive := func(active bool) {
		t.Helper()
		if st, body := scimDo(t, scim, e2eSCIMToken, "PATCH", "/Users/"+user["id"].(string), jsonDoc(t, fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"replace","value":{"active":%v}}]}`, active))); st != 200 || body["active"] != active {
			t.Fatalf("SCIM active %v: %d %v, want 200 with active %v", active, st, body, active)
		}
	}
	setActive(false)
	refused("deactivated by the directory")
	setActive(true)
	signInWithLink(t, smith, base, e.webLink("dr_smith"), "dr_smith")
	browse(t, smith, "the item after the reactivation", chromedp.Navigate(base+"/ui/items/"+item2), chromedp.WaitVisible(chromedp.CSS("#passkey-stepup")))
	e.MustOK(admin, "suspend_principal", map[string]any{"name": "dr_smith", "reason": "left the hospital"})
	refused("suspended")
	e.MustOK(admin, "lift_suspension", map[string]any{"name": "dr_smith", "reason": "back"})
	signInWithLink(t, smith, base, e.webLink("dr_smith"), "dr_smith")

	// 9. dr_smith removes their passkey, signs in again at the provider
	// and registers another; an admin removes that one, and dr_smith's
	// next item offers none.
	browse(t, smith, "dr_smith removes their passkey",
		chromedp.Navigate(base+"/ui/passkeys"),
		chromedp.Click(chromedp.CSS("#my-passkeys button.danger")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
		chromedp.WaitVisible(chromedp.CSS("#no-passkeys")),
	)
	audit = e.MustOK(admin, "audit_log", map[string]any{"limit": 100})
	if !regexp.MustCompile(`passkey_removed .* web: dr_smith removed their own passkey "work laptop"`).MatchString(audit.Text) {
		t.Fatalf("the removal is not audited:\n%s", audit.Text)
	}
	m.QueueUser(smithUser(time.Now()))
	browse(t, smith, "sign in again and register another passkey",
		chromedp.Click(chromedp.CSS("#passkey-signin")),
		chromedp.WaitVisible(chromedp.CSS("#register-fresh")),
		chromedp.SendKeys(chromedp.CSS("#passkey-label"), "phone"),
		chromedp.Click(chromedp.CSS("#passkey-add")),
		chromedp.WaitVisible(chromedp.CSS("#my-passkeys")),
	)
	ops := person(t)
	signInWithLink(t, ops, base, e.webLink("ops_admin"), "ops_admin")
	browse(t, ops, "the admin removes dr_smith's passkey",
		chromedp.Navigate(base+"/ui/passkeys"),
		chromedp.WaitVisible(chromedp.CSS("#all-passkeys")),
		chromedp.Click(chromedp.CSS("#all-passkeys button.danger")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	if n := read(t, ops, "listed passkeys", chromedp.Evaluate[int](`document.querySelectorAll("#all-passkeys .passkey-row").length`)); n != 0 {
		t.Fatalf("after the removal the admin's page lists %d passkeys, want 0", n)
	}
	audit = e.MustOK(admin, "audit_log", map[string]any{"limit": 100})
	if !regexp.MustCompile(`passkey_removed .* web: ops_admin removed dr_smith's passkey "phone"`).MatchString(audit.Text) {
		t.Fatalf("the removal is not audited:\n%s", audit.Text)
	}
	browse(t, smith, "the second item after the removal", chromedp.Navigate(base+"/ui/items/"+item2), chromedp.WaitVisible(chromedp.CSS("#no-passkey")))
	if n := read(t, smith, "passkey buttons", chromedp.Evaluate[int](`document.querySelectorAll("#passkey-stepup, #approve").length`)); n != 0 {
		t.Fatal("a removed passkey is still offered, or Approve is")
	}
}

// passkeyByHand is a script for the item page: it begins a passkey step-up
// for item begin, gets the assertion from the browser's WebAuthn (the
// virtual authenticator), and posts it times times to item finish's
// passkey route, returning each page's text.
func passkeyByHand(begin, finish string, times int) string {
	return fmt.Sprintf(`(async () => {
  const csrf = document.querySelector('form.reject input[name="csrf"]').value;
  const d = await (await fetch("/ui/items/%s/passkey/begin", {method: "POST", body: new URLSearchParams({csrf})})).json();
  if (d.problem) { return [d.problem]; }
  const cred = await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(d.publicKey)});
  const body = new URLSearchParams({csrf, credential: JSON.stringify(cred.toJSON())});
  const out = [];
  for (let i = 0; i < %d; i++) {
    out.push(await (await fetch("/ui/items/%s/passkey", {method: "POST", body})).text());
  }
  return out;
})()`, begin, times, finish)
}
