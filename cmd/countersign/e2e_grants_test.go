package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/discord/discordtest"
	"github.com/countersign/countersign/bot/bottest"
)

// grantsConfig is Slack and Discord on loopback fakes, restart_service
// allowing standing grants, and a destructive tool.
func grantsConfig(f *slackFake, dc *discordtest.Server) string {
	return fmt.Sprintf(`slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: %s
  channels: {default: C0DEFAULT}
discord:
  mode: http
  bot_token_env: DISCORD_BOT_TOKEN
  public_key_env: DISCORD_PUBLIC_KEY
  application_id: "APP"
  guild_id: %q
  api_url: %s
  channels: {default: %q}
tools:
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
    grants: {max: 8h, allow: [once, session, duration]}
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
    discord: "111"
`, f.srv.GetAPIURL(), discordGuild, dc.APIURL, discordDefault)
}

type grantsEnv struct {
	*testEnv
	slack *slackFake
	dc    *discordtest.Server
	dkey  ed25519.PrivateKey
	clock *bottest.Clock
	agent string
	admin string
}

func newGrantsEnv(t *testing.T) *grantsEnv {
	t.Helper()
	f := newSlackFake(t)
	dc := discordtest.New(t, discordToken)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, grantsConfig(f, dc))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	e.env["DISCORD_BOT_TOKEN"], e.env["DISCORD_PUBLIC_KEY"] = discordToken, hex.EncodeToString(pub)
	g := &grantsEnv{testEnv: e, slack: f, dc: dc, dkey: priv, clock: bottest.NewClock(time.Now().UTC())}
	e.clock = g.clock.Now
	g.agent = e.CreateKey("deploy_bot", "agent")
	g.admin = e.CreateKey("ops_admin", "admin")
	e.Start()
	return g
}

func (g *grantsEnv) restart(service string) toolResponse {
	g.t.Helper()
	return g.MustOK(g.agent, "confirm_action", map[string]any{
		"user_id": "ward7", "agent_id": "deployer", "run_id": "run-1",
		"tool": "restart_service", "arguments": map[string]any{"service": service}, "summary": "restart after OOM",
	})
}

// slackCard waits for the card of item n and returns its post.
func (g *grantsEnv) slackCard(n int) slackCall {
	g.t.Helper()
	var post slackCall
	waitFor(g.t, "the card of the request", func() bool {
		for _, c := range g.slack.Calls("chat.postMessage") {
			if c.Form.Get("thread_ts") == "" && strings.Contains(c.Form.Get("blocks"), fmt.Sprintf(`"countersign:%d"`, n)) {
				post = c
				return true
			}
		}
		return false
	})
	return post
}

// clickSlack presses a button of a card as dr_smith.
func (g *grantsEnv) clickSlack(post slackCall, action, value, trigger string) {
	g.t.Helper()
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": trigger, "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0DEFAULT", "message_ts": post.TS},
		"actions":   []any{map[string]any{"type": "button", "action_id": action, "block_id": "countersign-grants:1", "value": value, "action_ts": "1.1"}},
	})
	if code, _ := postSlack(g.t, g.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret); code != http.StatusOK {
		g.t.Fatalf("click answered %d, want %d", code, http.StatusOK)
	}
}

// threadNotes are the replies posted in the thread of post.
func (g *grantsEnv) threadNotes(post slackCall) []string {
	var out []string
	for _, c := range g.slack.Calls("chat.postMessage") {
		if c.Form.Get("thread_ts") == post.TS {
			out = append(out, c.Form.Get("text"))
		}
	}
	return out
}

var grantByRE = regexp.MustCompile(`^grant #1 by dr_smith \[([^\]]+)\]$`)

// sessionGrantFromSlack: the agent asks, dr_smith clicks "Approve for this
// session" on the Slack card, and the next three identical calls are
// approved at once under the grant, each with a thread note on the card.
func sessionGrantFromSlack(t *testing.T, g *grantsEnv) slackCall {
	first := g.restart("payments")
	if first.Data["status"] != "pending" {
		t.Fatalf("first call: %s, want pending", first)
	}
	post := g.slackCard(1)
	blocks := slackJSON(post.Form.Get("blocks"))
	for _, want := range []string{`"countersign.approve_grant"`, `"1|session"`, "Approve for this session", `"1|duration|1h"`, "Approve for 1h"} {
		if !strings.Contains(blocks, want) {
			t.Fatalf("the card lacks %s:\n%s", want, blocks)
		}
	}
	g.clickSlack(post, "countersign.approve_grant", "1|session", "t-grant")
	var st toolResponse
	waitFor(t, "the approval", func() bool {
		st = g.MustOK(g.agent, "action_status", map[string]any{"request_id": first.Data["request_id"]})
		return st.Data["status"] != "pending"
	})
	if st.Data["status"] != "approved" || st.Data["confirmed_by"] != "dr_smith [U0123ABC]" {
		t.Fatalf("the clicked request: %s, want approved, confirmed by %q", st, "dr_smith [U0123ABC]")
	}
	var by string
	for i := range 3 {
		g.clock.Advance(10 * time.Minute)
		r := g.restart("payments")
		cb, _ := r.Data["confirmed_by"].(string)
		m := grantByRE.FindStringSubmatch(cb)
		if r.Data["status"] != "approved" || m == nil || m[1] == "U0123ABC" || r.Data["grant_id"] != float64(1) || r.Data["receipt"] == nil {
			t.Fatalf("call %d under the grant: %s, want approved under grant_id 1 with a receipt, confirmed_by matching `%s` and not naming U0123ABC", i+1, r, grantByRE)
		}
		by = cb
		if i == 0 {
			waitFor(t, "a use's thread note", func() bool { return len(g.threadNotes(post)) > 1 })
		}
	}
	// The grant being made is the thread's first note, then its three uses.
	waitFor(t, "four thread notes", func() bool { return len(g.threadNotes(post)) == 4 })
	notes := g.threadNotes(post)
	if !regexp.MustCompile(`^🔁 dr_smith granted #1: session, same arguments, until (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC\.$`).MatchString(notes[0]) {
		t.Fatalf("the grant made, in the thread: %q, want %q", notes[0], "🔁 dr_smith granted #1: session, same arguments, until [YYYY-MM-DD ]HH:MM UTC.")
	}
	for _, n := range notes[1:] {
		if !strings.Contains(n, "Auto-approved req_") || !strings.Contains(n, "under grant #1 by dr_smith") {
			t.Fatalf("thread note: %q, want it to contain %q and %q", n, "Auto-approved req_", "under grant #1 by dr_smith")
		}
	}
	// Another service is not covered: it waits for a person.
	if r := g.restart("billing"); r.Data["status"] != "pending" {
		t.Fatalf("another service under the grant: %s, want pending", r)
	}
	l := g.MustOK(g.admin, "list_grants", nil)
	gs, _ := l.Data["grants"].([]any)
	if len(gs) != 1 || gs[0].(map[string]any)["created_by"] != strings.TrimPrefix(by, "grant #1 by ") || gs[0].(map[string]any)["uses"] != float64(3) {
		t.Fatalf("list_grants: %s, want one grant created by %q with 3 uses", l, strings.TrimPrefix(by, "grant #1 by "))
	}
	audit := g.MustOK(g.admin, "audit_log", map[string]any{"limit": 200})
	if !strings.Contains(audit.Raw, "by grant #1 by dr_smith") {
		t.Fatalf("the auto-approvals are not audited as such: %s", audit.Raw)
	}
	return post
}

// TestE2EGrantSessionStopsAtExpiry: a session grant made from a Slack
// click approves the next three identical calls, naming the grant and the
// person, and stops at its expiry (the tool's grants.max, on the server's
// settable clock). A grant on a destructive tool is refused; an agent key
// can neither make nor revoke one.
func TestE2EGrantSessionStopsAtExpiry(t *testing.T) {
	t.Parallel()
	g := newGrantsEnv(t)
	sessionGrantFromSlack(t, g)
	g.clock.Advance(8 * time.Hour)
	if r := g.restart("payments"); r.Data["status"] != "pending" {
		t.Fatalf("after the grant expired: %s, want pending", r)
	}
	if l := g.MustOK(g.admin, "list_grants", nil); len(l.Data["grants"].([]any)) != 0 {
		t.Fatalf("an expired grant is listed as live: %s", l)
	}

	// A destructive tool takes no grant, and offers none on its card.
	d := g.MustOK(g.agent, "confirm_action", map[string]any{"user_id": "ward7", "tool": "delete_database",
		"arguments": map[string]any{"db_name": "orders"}, "dry_run": "DROP DATABASE orders; -- 12 tables"})
	r := g.Call(g.admin, "approve_action", map[string]any{"request_id": d.Data["request_id"], "grant": map[string]any{"kind": "once"}})
	if r.Status != 400 || r.Field != "grant" || !strings.Contains(r.Error, "destructive") {
		t.Fatalf("a grant on a destructive tool: %s, want 400 on field grant, saying %q", r, "destructive")
	}
	if st := g.MustOK(g.agent, "action_status", map[string]any{"request_id": d.Data["request_id"]}); st.Data["status"] != "pending" {
		t.Fatalf("the refused grant recorded an approval: %s, want pending", st)
	}
	card := slackJSON(g.slackCard(int(d.Data["item_id"].(float64))).Form.Get("blocks"))
	if strings.Contains(card, "approve_grant") {
		t.Fatalf("a destructive card offers grants:\n%s", card)
	}

	// An agent key can neither make nor revoke a grant.
	p := g.restart("ledger")
	if r := g.Call(g.agent, "approve_action", map[string]any{"request_id": p.Data["request_id"], "grant": map[string]any{"kind": "session"}}); r.Status != 403 {
		t.Fatalf("an agent making a grant: %s, want 403", r)
	}
	if r := g.Call(g.agent, "revoke_grant", map[string]any{"grant_id": 1}); r.Status != 403 {
		t.Fatalf("an agent revoking a grant: %s, want 403", r)
	}
}

// TestE2EGrantRevokedFromDiscord: the same session grant made from a Slack
// click stops at once when dr_smith revokes it with the Revoke button of
// /countersign grants in Discord, another surface.
func TestE2EGrantRevokedFromDiscord(t *testing.T) {
	t.Parallel()
	g := newGrantsEnv(t)
	post := sessionGrantFromSlack(t, g)
	smith := discordtest.Clicker{UserID: "111", GuildID: discordGuild}
	post2 := func(body map[string]any) map[string]any {
		t.Helper()
		status, resp := discordtest.Post(t, g.URL+"/discord/interactions", g.dkey, g.clock.Now(), discordtest.Marshal(t, body))
		if status != 200 {
			t.Fatalf("discord interaction: %d %v, want 200", status, resp)
		}
		return resp
	}
	list := post2(discordtest.Command("cmd1", smith, discordDefault, "grants"))
	raw := string(discordtest.Marshal(t, list))
	if !strings.Contains(raw, "grant #1: session of restart") || !strings.Contains(raw, `"custom_id":"cs:revoke:1"`) {
		t.Fatalf("/countersign grants in Discord: %s, want it to contain %q and %q", raw, "grant #1: session of restart", `"custom_id":"cs:revoke:1"`)
	}
	rev := post2(discordtest.Click("click1", smith, discordDefault, "", "cs:revoke:1"))
	if raw := string(discordtest.Marshal(t, rev)); !strings.Contains(raw, "Revoked grant #1") {
		t.Fatalf("the Revoke button: %s, want it to contain %q", raw, "Revoked grant #1")
	}
	if r := g.restart("payments"); r.Data["status"] != "pending" {
		t.Fatalf("after the revocation: %s, want pending", r)
	}
	if l := g.MustOK(g.agent, "list_grants", map[string]any{"all": true}); !strings.Contains(l.Raw, `"revoked":true`) || !strings.Contains(l.Raw, `"revoked_by":"dr_smith [`) {
		t.Fatalf("the agent's view of its revoked grant: %s, want it to contain %q and %q", l, `"revoked":true`, `"revoked_by":"dr_smith [`)
	}
	waitFor(t, "the revocation in the card's thread", func() bool {
		for _, n := range g.threadNotes(post) {
			if strings.Contains(n, "grant #1 was revoked by dr_smith") {
				return true
			}
		}
		return false
	})
	audit := g.MustOK(g.admin, "audit_log", map[string]any{"limit": 200})
	if !strings.Contains(audit.Raw, "grant #1 (session of restart_service") {
		t.Fatalf("the revocation is not audited: %s", audit.Raw)
	}
}

// TestWebGrantChoiceAndRevoke: the console's item page offers the tool's
// grants with Approve; approving with "Approve for 1h" makes the grant
// (the next identical call is approved at once); the Grants page lists it,
// refuses a Revoke without the CSRF token, and revokes with it.
func TestWebGrantChoiceAndRevoke(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `tools:
  - name: restart_service
    category: mutating
    grants: {max: 8h, allow: [once, duration]}
principals:
  - {name: dr_smith, role: member, web: s@x.example}
`)
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	call := map[string]any{"user_id": "ward7", "tool": "restart_service", "arguments": map[string]any{"service": "payments"}}
	r := e.MustOK(agent, "confirm_action", call)
	c := signInHTTP(t, e, "dr_smith")
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+r.Data["request_id"].(string), nil)
	itemPath := resp.Header.Get("Location")
	_, page := webDo(t, c, "GET", e.URL+itemPath, nil)
	csrf, nonce := csrfRE.FindStringSubmatch(page), nonceRE.FindStringSubmatch(page)
	if csrf == nil || nonce == nil || !strings.Contains(page, `value="duration|1h"`) || !strings.Contains(page, "Approve for 1h") || strings.Contains(page, `value="session"`) {
		t.Fatalf("the item page does not offer the tool's grants:\n%s", page)
	}
	form := url.Values{"csrf": {csrf[1]}, "nonce": {nonce[1]}, "action": {"approve"}, "grant": {"duration|1h"}}
	if resp, _ := webDo(t, c, "POST", e.URL+itemPath+"/decide", form); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/?done=approve-") {
		t.Fatalf("approve with a grant answered %d %s, want %d to %s…", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "/ui/?done=approve-")
	}
	if next := e.MustOK(agent, "confirm_action", call); next.Data["status"] != "approved" || !strings.HasPrefix(next.Data["confirmed_by"].(string), "grant #1 by dr_smith [") {
		t.Fatalf("the next identical call: %s, want approved, confirmed_by starting %q", next, "grant #1 by dr_smith [")
	}
	_, page = webDo(t, c, "GET", e.URL+"/ui/grants", nil)
	csrf = csrfRE.FindStringSubmatch(page)
	if csrf == nil || !strings.Contains(page, `id="grant-1"`) || !strings.Contains(page, `action="/ui/grants/1/revoke"`) {
		t.Fatalf("the Grants page lacks a CSRF token, %q or %q:\n%s", `id="grant-1"`, `action="/ui/grants/1/revoke"`, page)
	}
	// Made in the console by a configured person who may still approve:
	// in force, not marked inactive (grants end with their maker).
	if strings.Contains(page, "inactive") {
		t.Fatalf("a grant in force is shown inactive:\n%s", page)
	}
	if resp, _ := webDo(t, c, "POST", e.URL+"/ui/grants/1/revoke", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a revoke without its CSRF token answered %d, want %d", resp.StatusCode, http.StatusForbidden)
	}
	if next := e.MustOK(agent, "confirm_action", call); next.Data["status"] != "approved" {
		t.Fatalf("the refused revoke revoked: %s, want approved", next)
	}
	if resp, _ := webDo(t, c, "POST", e.URL+"/ui/grants/1/revoke", url.Values{"csrf": {csrf[1]}}); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/grants?revoked=1" {
		t.Fatalf("the revoke answered %d %s, want %d to %s", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "/ui/grants?revoked=1")
	}
	if next := e.MustOK(agent, "confirm_action", call); next.Data["status"] != "pending" {
		t.Fatalf("after the console's revoke: %s, want pending", next)
	}
	if _, page = webDo(t, c, "GET", e.URL+"/ui/grants", nil); !strings.Contains(page, "no-grants") {
		t.Fatalf("a revoked grant is still listed:\n%s", page)
	}
}

// TestE2EGrantChatCommands: a grant made with the Discord card's
// approve-with-grant button; /countersign grants in Slack answers with a
// Revoke button per grant, its click revokes the grant, and `revoke-grant
// 1` typed afterwards says it was already revoked.
func TestE2EGrantChatCommands(t *testing.T) {
	t.Parallel()
	g := newGrantsEnv(t)
	first := g.restart("payments")
	smith := discordtest.Clicker{UserID: "111", GuildID: discordGuild}
	var msgID string
	g.dc.Wait("the card in Discord", func() bool {
		for _, m := range g.dc.MessagesIn(discordDefault) {
			for _, id := range discordButtonIDs(m) {
				if id == "cs:grant:1:1" {
					msgID = fmt.Sprint(m["id"])
					return true
				}
			}
		}
		return false
	})
	status, resp := discordtest.Post(t, g.URL+"/discord/interactions", g.dkey, g.clock.Now(), discordtest.Marshal(t, discordtest.Click("c1", smith, discordDefault, msgID, "cs:grant:1:1")))
	if status != 200 || !strings.Contains(string(discordtest.Marshal(t, resp)), "You made grant #1") {
		t.Fatalf("the Discord approve-with-grant button: %d %v, want 200 saying %q", status, resp, "You made grant #1")
	}
	if st := g.MustOK(g.agent, "action_status", map[string]any{"request_id": first.Data["request_id"]}); st.Data["status"] != "approved" {
		t.Fatalf("the clicked request: %s, want approved", st)
	}
	if r := g.restart("payments"); r.Data["status"] != "approved" {
		t.Fatalf("the next identical call under the Discord grant: %s, want approved", r)
	}

	slash := func(text, trigger string) map[string]any {
		t.Helper()
		form := url.Values{"team_id": {"T1"}, "user_id": {"U0123ABC"}, "channel_id": {"C0DEFAULT"}, "command": {"/countersign"}, "text": {text}, "trigger_id": {trigger}}
		code, body := postSlack(t, g.URL, "/slack/commands", form, e2eSlackSecret)
		var out map[string]any
		if err := json.Unmarshal([]byte(body), &out); err != nil || code != http.StatusOK {
			t.Fatalf("/countersign %s answered %d %s, want %d with a JSON body", text, code, body, http.StatusOK)
		}
		return out
	}
	list := slash("grants", "t-list")
	raw, _ := json.Marshal(list)
	if !strings.Contains(list["text"].(string), "grant #1: session of restart") || !strings.Contains(string(raw), `"action_id":"countersign.revoke_grant"`) || !strings.Contains(string(raw), `"value":"1"`) {
		t.Fatalf("/countersign grants in Slack: %s, want text with %q and a %q button of value %q", raw, "grant #1: session of restart", "countersign.revoke_grant", "1")
	}
	// The Revoke button of the answer.
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": "t-revbtn", "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
		"container": map[string]any{"type": "ephemeral", "channel_id": "C0DEFAULT"},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.revoke_grant", "block_id": "countersign-revoke:0", "value": "1", "action_ts": "2.2"}},
	})
	if code, _ := postSlack(t, g.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("the Revoke click answered %d, want %d", code, http.StatusOK)
	}
	waitFor(t, "the private answer to the Revoke click", func() bool {
		for _, c := range g.slack.Calls("chat.postEphemeral") {
			if strings.Contains(c.Form.Get("text"), "Revoked grant #1") {
				return true
			}
		}
		return false
	})
	if r := g.restart("payments"); r.Data["status"] != "pending" {
		t.Fatalf("after the Revoke button: %s, want pending", r)
	}
	if out := slash("revoke-grant 1", "t-revoke"); !strings.Contains(out["text"].(string), "grant #1 was already revoked by dr_smith") {
		t.Fatalf("/countersign revoke-grant 1: %v, want text with %q", out, "grant #1 was already revoked by dr_smith")
	}
	if out := slash("grants", "t-list2"); !strings.Contains(out["text"].(string), "No live standing grants") || out["blocks"] != nil {
		t.Fatalf("/countersign grants after the revocation: %v, want text with %q and no blocks", out, "No live standing grants")
	}
}

// TestWebGrantMatchConstraint: the console's grant choice lets the
// approver hold some arguments fixed (shown with their values); the grant
// made through chat.Decide then approves the agent's calls with the same
// service and another reason at once, and not a call with another
// service. Ticking arguments without choosing a grant does nothing.
func TestWebGrantMatchConstraint(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `tools:
  - name: restart_service
    category: mutating
    grants: {max: 8h, allow: [once, duration]}
principals:
  - {name: dr_smith, role: member, web: s@x.example}
`)
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	call := func(service, reason string) toolResponse {
		return e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward7", "tool": "restart_service",
			"arguments": map[string]any{"service": service, "reason": reason}})
	}
	r := call("payments", "oom")
	c := signInHTTP(t, e, "dr_smith")
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+r.Data["request_id"].(string), nil)
	itemPath := resp.Header.Get("Location")
	_, page := webDo(t, c, "GET", e.URL+itemPath, nil)
	csrf, nonce := csrfRE.FindStringSubmatch(page), nonceRE.FindStringSubmatch(page)
	if csrf == nil || nonce == nil || !strings.Contains(page, `id="grant-match"`) ||
		!strings.Contains(page, `name="match" value="service"> <code>service</code> = <code>payments</code>`) ||
		!strings.Contains(page, `name="match" value="reason"> <code>reason</code> = <code>oom</code>`) {
		t.Fatalf("the grant choice does not offer the arguments to hold fixed:\n%s", page)
	}
	// Ticked without a grant: refused, nothing recorded.
	form := url.Values{"csrf": {csrf[1]}, "nonce": {nonce[1]}, "action": {"approve"}, "match": {"service"}}
	if resp, _ := webDo(t, c, "POST", e.URL+itemPath+"/decide", form); resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "problem=") {
		t.Fatalf("match without a grant answered %d %s, want %d to a Location with %q", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "problem=")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": r.Data["request_id"]}); st.Data["status"] != "pending" {
		t.Fatalf("match without a grant decided the request: %s, want pending", st)
	}
	form.Set("grant", "duration|1h")
	if resp, _ := webDo(t, c, "POST", e.URL+itemPath+"/decide", form); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/?done=approve-") {
		t.Fatalf("approve with a match grant answered %d %s, want %d to %s…", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "/ui/?done=approve-")
	}
	if next := call("payments", "deploy 42"); next.Data["status"] != "approved" || !strings.HasPrefix(next.Data["confirmed_by"].(string), "grant #1 by dr_smith [") {
		t.Fatalf("the same service with another reason: %s, want approved, confirmed_by starting %q", next, "grant #1 by dr_smith [")
	}
	if next := call("billing", "oom"); next.Data["status"] != "pending" {
		t.Fatalf("another service under a grant held to payments: %s, want pending", next)
	}
	l := e.MustOK(agent, "list_grants", nil)
	gs, _ := l.Data["grants"].([]any)
	if cons, _ := gs[0].(map[string]any)["constraint"].(string); len(gs) != 1 || strings.Contains(cons, "args_sha256") || !strings.Contains(cons, "service") || strings.Contains(cons, "reason") {
		t.Fatalf("list_grants: %s, want one grant whose constraint names service, not reason nor args_sha256", l)
	}
}
