package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/countersign/countersign/config"
)

// webClient is an HTTP client with a cookie jar that does not follow
// redirects, so that each answer can be checked.
func webClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func webDo(t *testing.T, c *http.Client, method, u string, form url.Values, header ...string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestWebSessionsOverHTTP plays the console's security rules against the
// real server without a browser: the headers of every page, a tampered and
// a reused sign-in link, the session cookie's attributes, a form without
// its CSRF token or from another origin, and signing out.
func TestWebSessionsOverHTTP(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "principals:\n  - name: dr_smith\n    role: member\n    web: dr.smith@hospital.example\n")
	e.Start()
	c := webClient(t)

	resp, _ := webDo(t, c, "GET", e.URL+"/ui/", nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/signin") {
		t.Fatalf("GET /ui/ signed out: %d %s, want 303 to the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, page := webDo(t, c, "GET", e.URL+"/ui/signin", nil)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") ||
		resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("sign-in page headers: %d %v, want 200 with a CSP of script-src 'self' and frame-ancestors 'none' (no unsafe-inline), X-Frame-Options DENY and X-Content-Type-Options nosniff", resp.StatusCode, resp.Header)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, " style=") {
		t.Errorf("a page carries inline script or style, want no %q or %q:\n%s", "<script>", " style=", page)
	}

	link := e.webLink("dr_smith")
	tok := strings.TrimPrefix(link, "/ui/signin/link?t=")
	tok, _ = url.QueryUnescape(tok)
	tampered := tok[:len(tok)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(tok, "AA")]
	if resp, body := webDo(t, c, "POST", e.URL+"/ui/signin/link", url.Values{"t": {tampered}}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not valid") {
		t.Fatalf("tampered link: %d, want %d with %q", resp.StatusCode, http.StatusForbidden, "not valid")
	}
	if resp, body := webDo(t, c, "GET", e.URL+link, nil); resp.StatusCode != 200 || !strings.Contains(body, "Continue as dr_smith") {
		t.Fatalf("opening the link: %d, want 200 with %q\n%s", resp.StatusCode, "Continue as dr_smith", body)
	}
	resp, _ = webDo(t, c, "POST", e.URL+"/ui/signin/link", url.Values{"t": {tok}})
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "countersign_session" {
			cookie = ck
		}
	}
	if resp.StatusCode != 200 || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Secure {
		t.Fatalf("sign-in answer %d, cookie %+v: want HttpOnly, SameSite=Strict (not Secure over http)", resp.StatusCode, cookie)
	}
	if resp, body := webDo(t, webClient(t), "POST", e.URL+"/ui/signin/link", url.Values{"t": {tok}}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "already used") {
		t.Fatalf("reused link: %d, want %d with %q", resp.StatusCode, http.StatusForbidden, "already used")
	}

	resp, inbox := webDo(t, c, "GET", e.URL+"/ui/", nil)
	m := csrfRE.FindStringSubmatch(inbox)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(inbox, "Nothing awaits a decision") {
		t.Fatalf("inbox: %d, want 200 with a CSRF token and %q\n%s", resp.StatusCode, "Nothing awaits a decision", inbox)
	}
	csrf := m[1]
	if resp, body := webDo(t, c, "POST", e.URL+"/ui/signout", url.Values{}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "security token") {
		t.Fatalf("sign-out without the CSRF token: %d, want %d with %q", resp.StatusCode, http.StatusForbidden, "security token")
	}
	if resp, _ := webDo(t, c, "POST", e.URL+"/ui/signout", url.Values{"csrf": {"x" + csrf}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-out with a wrong CSRF token: %d, want %d", resp.StatusCode, http.StatusForbidden)
	}
	if resp, body := webDo(t, c, "POST", e.URL+"/ui/signout", url.Values{"csrf": {csrf}}, "Origin", "http://evil.example"); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "another site") {
		t.Fatalf("cross-origin sign-out: %d, want %d with %q", resp.StatusCode, http.StatusForbidden, "another site")
	}
	if resp, _ := webDo(t, c, "GET", e.URL+"/ui/", nil); resp.StatusCode != 200 {
		t.Fatalf("the session ended after refused forms: GET /ui/ answered %d, want 200", resp.StatusCode)
	}
	if resp, _ := webDo(t, c, "POST", e.URL+"/ui/signout", url.Values{"csrf": {csrf}}, "Origin", e.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d, want %d", resp.StatusCode, http.StatusSeeOther)
	}
	if resp, _ := webDo(t, c, "GET", e.URL+"/ui/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after signing out GET /ui/ answered %d, want 303 to sign-in", resp.StatusCode)
	}
	// The old cookie is dead server-side, not only in this jar.
	if resp, _ := webDo(t, webClient(t), "GET", e.URL+"/ui/", nil, "Cookie", "countersign_session="+cookie.Value); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a signed-out session's cookie still opens the inbox: %d, want %d", resp.StatusCode, http.StatusSeeOther)
	}
}

// TestWebConfig: the console can be turned off, and its section is checked
// with every problem named by key.
func TestWebConfig(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "web:\n  enabled: false\n")
	e.Start()
	if resp, _ := webDo(t, webClient(t), "GET", e.URL+"/ui/signin", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("web.enabled false: /ui/signin answered %d, want 404", resp.StatusCode)
	}
	_, err := config.Parse([]byte(`web:
  public_url: ftp://x/y
  session_ttl: -1h
  oidc: {issuer: "", client_id: ""}
principals:
  - {name: a, role: member, web: A@x.example}
  - {name: b, role: member, web: a@x.example}
`), t.TempDir())
	for _, want := range []string{"web.public_url:", "web.session_ttl: must not be negative", "web.oidc.issuer: required", "web.oidc.client_id: required", "web.oidc.client_secret_env: required", `principals[1].web: "a@x.example" is already the web identity of a`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config problems %v: missing %q", err, want)
		}
	}
}

// signInHTTP signs name in through a one-time link with a cookie jar.
func signInHTTP(t *testing.T, e *testEnv, name string) *http.Client {
	t.Helper()
	c := webClient(t)
	tok, _ := url.QueryUnescape(strings.TrimPrefix(e.webLink(name), "/ui/signin/link?t="))
	if resp, body := webDo(t, c, "POST", e.URL+"/ui/signin/link", url.Values{"t": {tok}}); resp.StatusCode != 200 {
		t.Fatalf("sign-in of %s: %d, want 200\n%s", name, resp.StatusCode, body)
	}
	return c
}

var auditRowRE = regexp.MustCompile(`<tr id="seq-(\d+)">`)
var olderRE = regexp.MustCompile(`id="older" href="([^"]+)"|href="([^"]+)" rel="next" id="older"`)

// TestWebAuditPages: the audit page pages through audit_log with its cursor,
// filters by action, exports every entry as JSON Lines, and refuses the
// deployment-wide log to a member as the API does.
func TestWebAuditPages(t *testing.T) {
	t.Parallel()
	// 61 calls from one agent: more than the default burst of 60, so the
	// test would race the token refill (and lose on a fast machine).
	e := newTestEnv(t, "http:\n  rate_burst: 200\nprincipals:\n  - {name: boss, role: admin, web: boss@x.example}\n  - {name: dr_smith, role: member, web: s@x.example, scopes: [ward_a]}\n")
	agent := e.CreateKey("intake", "agent")
	e.Start()
	for i := range 60 {
		e.MustOK(agent, "remember", map[string]any{"user_id": "ward_a", "subject": fmt.Sprintf("note_%d", i), "value": "v", "text": "t"})
	}
	count, _ := e.MustOK(agent, "audit_log", map[string]any{"user_id": "ward_a", "limit": 1000}).Data["count"].(float64)
	total := int(count)
	if total < 60 {
		t.Fatalf("ward_a's trail has %d entries, want at least the 60 remembers", total)
	}
	boss := signInHTTP(t, e, "boss")

	seen := map[string]bool{}
	next := "/ui/audit"
	for pages := 0; next != ""; pages++ {
		if pages > 10 {
			t.Fatal("the audit pages do not end")
		}
		resp, body := webDo(t, boss, "GET", e.URL+strings.ReplaceAll(next, "&amp;", "&"), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d, want 200", next, resp.StatusCode)
		}
		rows := auditRowRE.FindAllStringSubmatch(body, -1)
		if len(rows) > 50 || len(rows) == 0 {
			t.Fatalf("page %d shows %d rows, want 1 to 50", pages, len(rows))
		}
		for _, r := range rows {
			if seen[r[1]] {
				t.Fatalf("entry %s shown on two pages", r[1])
			}
			seen[r[1]] = true
		}
		next = ""
		if m := olderRE.FindStringSubmatch(body); m != nil {
			next = m[1] + m[2]
		}
	}
	// The deployment-wide log holds the ward's entries and more (sign-ins, keys).
	if len(seen) <= total {
		t.Errorf("paged through %d entries, want more than the %d of ward_a", len(seen), total)
	}

	_, body := webDo(t, boss, "GET", e.URL+"/ui/audit?action=web_sign_in", nil)
	if n := len(auditRowRE.FindAllString(body, -1)); n != 1 {
		t.Errorf("filter action=web_sign_in shows %d rows, want 1", n)
	}
	resp, export := webDo(t, boss, "GET", e.URL+"/ui/audit/export?space=ward_a", nil)
	lines := strings.Split(strings.TrimSpace(export), "\n")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || len(lines) != total {
		t.Fatalf("export: %d %s, %d lines, want %d", resp.StatusCode, resp.Header.Get("Content-Type"), len(lines), total)
	}
	for _, l := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(l), &entry); err != nil || entry["user_id"] != "ward_a" || entry["sig"] == "" {
			t.Fatalf("export line %q, want a JSON entry of user_id ward_a with a sig", l)
		}
	}

	member := signInHTTP(t, e, "dr_smith")
	_, body = webDo(t, member, "GET", e.URL+"/ui/audit?space=", nil)
	// A member's default is their first scope; asking for another space is refused as over the API.
	if n := len(auditRowRE.FindAllString(body, -1)); n == 0 || !strings.Contains(body, "ward_a") {
		t.Errorf("a scoped member's audit page shows %d rows, want some and %q in the page", n, "ward_a")
	}
	_, body = webDo(t, member, "GET", e.URL+"/ui/audit?space=ward_b", nil)
	if !strings.Contains(body, "outside your assigned scope") || len(auditRowRE.FindAllString(body, -1)) != 0 {
		t.Errorf("another space's trail for a scoped member, want %q and no rows:\n%s", "outside your assigned scope", body)
	}
	if resp, _ := webDo(t, member, "GET", e.URL+"/ui/audit/export", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a member's deployment-wide export answered %d, want 403", resp.StatusCode)
	}
}

var nonceRE = regexp.MustCompile(`name="nonce" value="([^"]+)"`)

// TestWebAnswersAQuestionOnce: a question is answered from its page through
// the one decision function (chat.Decide), by option; the same form sent
// twice is applied once; a rejection without a reason is refused and
// changes nothing.
func TestWebAnswersAQuestionOnce(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "principals:\n  - {name: dr_smith, role: member, web: s@x.example}\n")
	agent := e.CreateKey("intake", "agent")
	e.Start()
	q := e.MustOK(agent, "ask_user", map[string]any{"question": "Which ward?", "options": []string{"ward 3", "ward 5"}})
	rid, _ := q.Data["request_id"].(string)
	c := signInHTTP(t, e, "dr_smith")
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+rid, nil)
	itemPath := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(itemPath, "/ui/items/") {
		t.Fatalf("/ui/requests/%s: %d %s, want %d to a location starting %q", rid, resp.StatusCode, itemPath, http.StatusSeeOther, "/ui/items/")
	}
	_, page := webDo(t, c, "GET", e.URL+itemPath, nil)
	csrf, nonce := csrfRE.FindStringSubmatch(page), nonceRE.FindStringSubmatch(page)
	if csrf == nil || nonce == nil || !strings.Contains(page, "ward 5") {
		t.Fatalf("question page, want a CSRF token, a nonce and %q:\n%s", "ward 5", page)
	}
	form := url.Values{"csrf": {csrf[1]}, "nonce": {nonce[1]}, "action": {"answer"}, "answer": {"1"}}
	if resp, _ := webDo(t, c, "POST", e.URL+itemPath+"/decide", form); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/?done=answer-") {
		t.Fatalf("answering: %d %s, want %d to a location starting %q", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "/ui/?done=answer-")
	}
	resp, _ = webDo(t, c, "POST", e.URL+itemPath+"/decide", form)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc.Query().Get("problem"), "already answered by dr_smith") {
		t.Fatalf("the same form again: %d %s, want %d with a problem containing %q", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "already answered by dr_smith")
	}
	_, page = webDo(t, c, "GET", e.URL+resp.Header.Get("Location"), nil)
	if !strings.Contains(page, "Nothing was changed") {
		t.Errorf("the item page does not say the resubmission was not applied")
	}
	// A problem message is shown only with this server's MAC.
	if _, forged := webDo(t, c, "GET", e.URL+itemPath+"?problem=Call+555-0100+to+confirm&pm=x", nil); strings.Contains(forged, "555-0100") {
		t.Error("a crafted problem message is shown on the item page")
	}
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid})
	if ans, _ := st.Data["answers"].([]any); st.Data["status"] != "answered" || len(ans) != 1 || ans[0] != "ward 5" {
		t.Fatalf("question after the web answer: %s, want status answered with the one answer %q", st, "ward 5")
	}
}

// TestWebLinksFromSlack: with web.public_url set, a Slack card links to the
// item's page, and `/countersign web` answers the mapped person privately
// with a one-time link that signs them in once (an unmapped user gets none).
func TestWebLinksFromSlack(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, webConfig(f)+"web:\n  public_url: https://countersign.hospital.example\n")
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("intake", "agent")
	e.Start()
	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "full code", "text": "full code"})
	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "DNR", "text": "DNR"})
	waitFor(t, "the proposal to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	if blocks := slackJSON(f.Calls("chat.postMessage")[0].Form.Get("blocks")); !strings.Contains(blocks, "<https://countersign.hospital.example/ui/items/1|Open in browser>") {
		t.Fatalf("the Slack card has no link to the console:\n%s", blocks)
	}

	ask := func(user string) string {
		form := url.Values{"team_id": {"T1"}, "user_id": {user}, "channel_id": {"C0DEFAULT"}, "command": {"/countersign"}, "text": {"web"}, "trigger_id": {"t-" + user}}
		code, body := postSlack(t, e.URL, "/slack/commands", form, e2eSlackSecret)
		var resp struct {
			ResponseType string `json:"response_type"`
			Text         string `json:"text"`
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusOK || resp.ResponseType != "ephemeral" {
			t.Fatalf("/countersign web answered %d %s; want a private reply", code, body)
		}
		return resp.Text
	}
	if text := ask("U0NOBODY"); strings.Contains(text, "/ui/signin/link") || !strings.Contains(text, "not mapped") {
		t.Fatalf("an unmapped user got: %s, want %q and no sign-in link", text, "not mapped")
	}
	text := ask("U0123ABC")
	m := regexp.MustCompile(`https://countersign\.hospital\.example(/ui/signin/link\?t=[^\s>|]+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no sign-in link in the reply: %s", text)
	}
	tok, _ := url.QueryUnescape(strings.TrimPrefix(m[1], "/ui/signin/link?t="))
	resp, _ := webDo(t, webClient(t), "POST", e.URL+"/ui/signin/link", url.Values{"t": {tok}})
	var named bool
	for _, ck := range resp.Cookies() {
		named = named || (ck.Name == "__Host-countersign" && ck.Secure && ck.HttpOnly && ck.SameSite == http.SameSiteStrictMode)
	}
	if resp.StatusCode != 200 || !named {
		t.Fatalf("signing in with the chat link: %d %v; want a Secure __Host- cookie (public_url is https)", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := webDo(t, webClient(t), "POST", e.URL+"/ui/signin/link", url.Values{"t": {tok}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the chat link worked twice: %d, want %d", resp.StatusCode, http.StatusForbidden)
	}
}

// TestWebOIDCCallbackBoundToBrowser plays a login-CSRF attack against the
// real server and a real provider: the callback URL of a sign-in started in
// one browser, opened in another, signs nobody in; the browser that started
// it finishes it, once.
func TestWebOIDCCallbackBoundToBrowser(t *testing.T) {
	t.Parallel()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	e := newTestEnv(t, "principals:\n  - {name: dr_smith, role: member, web: dr.smith@hospital.example}\nweb:\n  oidc: {issuer: "+m.Issuer()+", client_id: "+m.ClientID+", client_secret_env: OIDC_SECRET}\n")
	e.env["OIDC_SECRET"] = m.ClientSecret
	e.Start()
	m.QueueUser(&mockoidc.MockUser{Subject: "u-1", Email: "dr.smith@hospital.example", EmailVerified: true})

	starter := webClient(t)
	resp, _ := webDo(t, starter, "GET", e.URL+"/ui/signin/oidc", nil)
	authz, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || authz.Query().Get("code_challenge_method") != "S256" || authz.Query().Get("nonce") == "" || authz.Query().Get("state") == "" {
		t.Fatalf("sign-in start: %d %s; want a redirect with PKCE S256, state and nonce", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = webDo(t, webClient(t), "GET", authz.String(), nil) // the provider signs the user in and redirects back
	callback := resp.Header.Get("Location")
	if !strings.HasPrefix(callback, e.URL+"/ui/oidc/callback?") {
		t.Fatalf("the provider answered %d %q, want a location starting %q", resp.StatusCode, callback, e.URL+"/ui/oidc/callback?")
	}

	victim := webClient(t)
	if resp, body := webDo(t, victim, "GET", callback, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "started in this browser") {
		t.Fatalf("the callback in another browser: %d, want %d with %q", resp.StatusCode, http.StatusBadRequest, "started in this browser")
	}
	if resp, _ := webDo(t, victim, "GET", e.URL+"/ui/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the other browser was signed in: GET /ui/ answered %d, want %d", resp.StatusCode, http.StatusSeeOther)
	}
	if resp, body := webDo(t, starter, "GET", callback, nil); resp.StatusCode != 200 || !strings.Contains(body, "Signed in") {
		t.Fatalf("the starting browser's callback: %d, want 200 with %q\n%s", resp.StatusCode, "Signed in", body)
	}
	if resp, _ := webDo(t, starter, "GET", e.URL+"/ui/", nil); resp.StatusCode != 200 {
		t.Fatalf("after the OIDC sign-in the inbox answered %d, want 200", resp.StatusCode)
	}
	if resp, _ := webDo(t, starter, "GET", callback, nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a replayed callback answered %d, want 400", resp.StatusCode)
	}
}

// TestWebLinkNeverCreatesTheSigningKey: `web link` before the first start
// refuses and leaves no key file behind. A key it created would not be the
// key the store's chain is later signed with, or (once a chain exists) would
// stop serve, which refuses a key that does not sign the chain.
func TestWebLinkNeverCreatesTheSigningKey(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "principals:\n  - {name: dr_smith, role: member, web: s@x.example}\n")
	cfg, err := config.Load(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = run(context.Background(), []string{"web", "link", "--config", e.cfg, "--name", "dr_smith"}, e.getenv, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "audit.signing_key: no key at") {
		t.Fatalf("web link without a key: %v, printed %q; want the missing key named", err, out.String())
	}
	if _, statErr := os.Stat(cfg.Audit.SigningKey); !errors.Is(statErr, os.ErrNotExist) {
		t.Fatalf("web link left a key file at %s (%v), want none", cfg.Audit.SigningKey, statErr)
	}
}
