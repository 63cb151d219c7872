package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
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
		t.Fatalf("sign-in page headers: %d %v", resp.StatusCode, resp.Header)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, " style=") {
		t.Errorf("a page carries inline script or style:\n%s", page)
	}

	link := e.webLink("dr_smith")
	tok := strings.TrimPrefix(link, "/ui/signin/link?t=")
	tok, _ = url.QueryUnescape(tok)
	tampered := tok[:len(tok)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(tok, "AA")]
	if resp, body := webDo(t, c, "POST", e.URL+"/ui/signin/link", url.Values{"t": {tampered}}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not valid") {
		t.Fatalf("tampered link: %d", resp.StatusCode)
	}
	if resp, body := webDo(t, c, "GET", e.URL+link, nil); resp.StatusCode != 200 || !strings.Contains(body, "Continue as dr_smith") {
		t.Fatalf("opening the link: %d\n%s", resp.StatusCode, body)
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
		t.Fatalf("reused link: %d", resp.StatusCode)
	}

	resp, inbox := webDo(t, c, "GET", e.URL+"/ui/", nil)
	m := csrfRE.FindStringSubmatch(inbox)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(inbox, "Nothing awaits a decision") {
		t.Fatalf("inbox: %d\n%s", resp.StatusCode, inbox)
	}
	csrf := m[1]
	if resp, body := webDo(t, c, "POST", e.URL+"/ui/signout", url.Values{}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "security token") {
		t.Fatalf("sign-out without the CSRF token: %d", resp.StatusCode)
	}
	if resp, _ := webDo(t, c, "POST", e.URL+"/ui/signout", url.Values{"csrf": {"x" + csrf}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-out with a wrong CSRF token: %d", resp.StatusCode)
	}
	if resp, body := webDo(t, c, "POST", e.URL+"/ui/signout", url.Values{"csrf": {csrf}}, "Origin", "http://evil.example"); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "another site") {
		t.Fatalf("cross-origin sign-out: %d", resp.StatusCode)
	}
	if resp, _ := webDo(t, c, "GET", e.URL+"/ui/", nil); resp.StatusCode != 200 {
		t.Fatalf("the session ended after refused forms: %d", resp.StatusCode)
	}
	if resp, _ := webDo(t, c, "POST", e.URL+"/ui/signout", url.Values{"csrf": {csrf}}, "Origin", e.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	if resp, _ := webDo(t, c, "GET", e.URL+"/ui/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after signing out GET /ui/ answered %d, want 303 to sign-in", resp.StatusCode)
	}
	// The old cookie is dead server-side, not only in this jar.
	if resp, _ := webDo(t, webClient(t), "GET", e.URL+"/ui/", nil, "Cookie", "countersign_session="+cookie.Value); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a signed-out session's cookie still opens the inbox: %d", resp.StatusCode)
	}
}

// TestWebConfig: the console can be turned off, and its section is checked
// with every problem named by key.
func TestWebConfig(t *testing.T) {
	e := newTestEnv(t, "web:\n  enabled: false\n")
	e.Start()
	if resp, _ := webDo(t, webClient(t), "GET", e.URL+"/ui/signin", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("web.enabled false: /ui/signin answered %d, want 404", resp.StatusCode)
	}
	_, err := parseConfig([]byte(`web:
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
