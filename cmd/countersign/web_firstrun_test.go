package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

// webLinkCLI runs `countersign web link` with args and returns what it
// printed and its error.
func (e *testEnv) webLinkCLI(args ...string) (string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), append([]string{"web", "link", "--config", e.cfg}, args...), e.getenv, strings.NewReader(""), &out, &errb)
	return strings.TrimSpace(out.String()), err
}

// TestWebFirstRun: the console's first run against the real server: GET /
// goes to /ui/, serve says where the console is, and `web link` asks the
// running server for a link (a stored principal's too, with the store held
// by the server): a person for themselves, an admin for anyone; a member
// naming someone else and an agent are refused, and every link minted is
// audited.
func TestWebFirstRun(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "principals:\n  - {name: nurse_v, role: viewer, web: nurse.v@x.example}\n")
	admin := e.CreateKey("boss", "admin")
	member := e.CreateKey("dr_smith", "member")
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	e.env[urlEnv] = e.URL // the config listens on port 0

	c := webClient(t)
	resp, _ := webDo(t, c, "GET", e.URL+"/", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET / answered %d to %q, want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := webDo(t, c, "GET", e.URL+"/nothing", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing answered %d, want the API's 404", resp.StatusCode)
	}
	if want := `msg="web console" url=` + e.URL + "/ui/"; !strings.Contains(e.logs.String(), want) {
		t.Errorf("serve's log does not say where the console is (%s):\n%s", want, e.logs.String())
	}

	// Without a key, a stored principal needs the store: bbolt's file is
	// held by the server, so the command points at --key; PostgreSQL is
	// shared by every replica, so the command reads it and mints the link.
	if os.Getenv(testStoreEnv) == config.EnginePostgres {
		if link, err := e.webLinkCLI("--name", "dr_smith"); err != nil || !strings.Contains(link, "/ui/signin/link") {
			t.Errorf("web link for a stored principal on PostgreSQL, without a key: %q, %v; want a sign-in link", link, err)
		}
	} else if _, err := e.webLinkCLI("--name", "dr_smith"); err == nil || !strings.Contains(err.Error(), "--key") {
		t.Errorf("web link for a stored principal while the server runs, without a key: %v; want a pointer to --key", err)
	}

	signIn := func(link, want string) {
		t.Helper()
		u, err := url.Parse(link)
		if err != nil || u.Scheme+"://"+u.Host != e.URL || u.Path != "/ui/signin/link" {
			t.Fatalf("web link printed %q, want a sign-in link on %s", link, e.URL)
		}
		b := webClient(t)
		if resp, body := webDo(t, b, "GET", link, nil); resp.StatusCode != 200 || !strings.Contains(body, "Continue as "+want) {
			t.Fatalf("the link's page: %d, want Continue as %s\n%s", resp.StatusCode, want, body)
		}
		if resp, body := webDo(t, b, "POST", e.URL+"/ui/signin/link", url.Values{"t": {u.Query().Get("t")}}); resp.StatusCode != 200 {
			t.Fatalf("signing in with the link: %d, want 200\n%s", resp.StatusCode, body)
		}
		if _, body := webDo(t, b, "GET", e.URL+"/ui/", nil); !strings.Contains(body, `class="me"`) || !strings.Contains(body, want) {
			t.Fatalf("after signing in, the inbox does not show %s:\n%s", want, body)
		}
	}
	own, err := e.webLinkCLI("--key", member)
	if err != nil {
		t.Fatalf("web link --key (a member's own): %v", err)
	}
	signIn(own, "dr_smith")
	byAdmin, err := e.webLinkCLI("--key", admin, "--name", "dr_smith")
	if err != nil {
		t.Fatalf("web link --key ADMIN --name dr_smith: %v", err)
	}
	signIn(byAdmin, "dr_smith")
	e.env[apiKeyEnv] = admin // the key from the environment, for a principal of the config
	cfgLink, err := e.webLinkCLI("--name", "nurse_v")
	delete(e.env, apiKeyEnv)
	if err != nil {
		t.Fatalf("web link with $%s for a config principal: %v", apiKeyEnv, err)
	}
	signIn(cfgLink, "nurse_v")

	for _, tc := range []struct {
		what string
		args []string
		want string
	}{
		{"a member naming someone else", []string{"--key", member, "--name", "boss"}, "needs the 'admin' role"},
		{"an agent's own link", []string{"--key", agent}, "only people sign in"},
		{"an admin naming an agent", []string{"--key", admin, "--name", "ward_bot"}, "only people sign in"},
		{"an admin naming nobody known", []string{"--key", admin, "--name", "nobody"}, "no principal"},
		{"a key the server does not know", []string{"--key", "cs_sk_unknown"}, "401"},
	} {
		if out, err := e.webLinkCLI(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) || out != "" {
			t.Errorf("%s: printed %q, err %v; want no link and %q", tc.what, out, err, tc.want)
		}
	}
	log := e.MustOK(admin, "audit_log", map[string]any{"limit": 1000}).Raw
	for _, want := range []string{"one-time sign-in link for dr_smith minted", "one-time sign-in link for nurse_v minted", "web_link: Access denied: a sign-in link for someone else"} {
		if !strings.Contains(log, want) {
			t.Errorf("the audit log lacks %q", want)
		}
	}
}
