package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/adapters/discord/discordtest"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// stepUpUser is a test provider's user whose ID token carries auth_time:
// the time authTime returns (now for a real re-authentication, an older
// time for a provider that ignores prompt=login).
type stepUpUser struct {
	*mockoidc.MockUser
	authTime time.Time
}

func (u stepUpUser) Claims(scopes []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	c, err := u.MockUser.Claims(scopes, base)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var m jwt.MapClaims
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["auth_time"] = u.authTime.Unix()
	return m, nil
}

// stepUpProvider runs the test OIDC provider on loopback and records the
// query of every authorization request.
func stepUpProvider(t *testing.T) (*mockoidc.MockOIDC, func() []url.Values) {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []url.Values
	if err := m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == mockoidc.AuthorizationEndpoint {
				mu.Lock()
				seen = append(seen, r.URL.Query())
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m, func() []url.Values { mu.Lock(); defer mu.Unlock(); return append([]url.Values(nil), seen...) }
}

func stepUpConfig(f *slackFake, m *mockoidc.MockOIDC) string {
	return `slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + f.srv.GetAPIURL() + `
  channels: {default: C0DEFAULT, ops: C0OPS}
tools:
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
    approvers: {roles: [member, admin]}
    channels: [ops]
  - name: rollback_production
    category: destructive
    quorum: 2
    approvers: {roles: [member]}
    channels: [ops]
  - name: restart_service
    category: mutating
step_up:
  categories: [destructive]
  within: 5m
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
    web: dr.smith@hospital.example
  - name: dr_jones
    role: member
    slack: U0456DEF
    web: dr.jones@hospital.example
web:
  oidc:
    issuer: ` + m.Issuer() + `
    client_id: ` + m.ClientID + `
    client_secret_env: OIDC_SECRET
`
}

var stepUpLinkRE = regexp.MustCompile(`/ui/stepup\?t=[A-Za-z0-9_.\-]+`)

// TestStepUpEndToEnd is the step-up scenario against the real
// server, the real slack-go client on a loopback fake, a real browser and
// a real OIDC provider: a destructive request is refused from a Slack click
// with a private one-time console link (audited; still pending) and from a
// person's API key; the link leads through a fresh sign-in (prompt=login,
// max_age=0) to the item, approved there, the audit recording the step-up;
// a provider answering with a stale auth_time is refused, and an approval
// posted from a stale session is refused by the rule; under quorum 2 both
// approvers step up.
func TestStepUpEndToEnd(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	f := newSlackFake(t)
	m, authorizations := stepUpProvider(t)
	e := newTestEnv(t, stepUpConfig(f, m))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"], e.env["OIDC_SECRET"] = "xoxb-e2e", e2eSlackSecret, m.ClientSecret
	agent := e.CreateKey("deploy_bot", "agent")
	admin := e.CreateKey("root", "admin")
	smithKey := e.CreateKey("dr_smith", "member", "--kind", "person")
	e.Start()

	// A destructive request: posted with the step-up line.
	r := e.MustOK(agent, "confirm_action", map[string]any{
		"tool": "delete_database", "arguments": map[string]any{"db_name": "orders_prod"}, "dry_run": "DROP DATABASE orders_prod; -- 42 tables",
	})
	reqID, _ := r.Data["request_id"].(string)
	waitFor(t, "the request to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	if b := slackJSON(post.Form.Get("blocks")); !strings.Contains(b, "approving needs a fresh sign-in (within 5 minutes)") {
		t.Fatalf("the card does not say it needs step-up:\n%s", b)
	}
	itemID := slackItemID(t, post)

	// The person's API key is refused by the one rule.
	if res := e.Call(smithKey, "approve_action", map[string]any{"request_id": reqID}); res.Status != http.StatusForbidden || !strings.Contains(res.Raw, "step-up required: approve in the console after signing in again") {
		t.Fatalf("approve_action with a person's key: %s, want 403 saying %q", res, "step-up required: approve in the console after signing in again")
	}

	// A Slack click is refused privately with a one-time link.
	slackClick(t, e, post, "U0123ABC", itemID, "t-su-1")
	waitFor(t, "the private step-up answer", func() bool { return len(f.Calls("chat.postEphemeral")) == 1 })
	eph := f.Calls("chat.postEphemeral")[0]
	text := eph.Form.Get("text")
	link := stepUpLinkRE.FindString(text)
	if eph.Form.Get("user") != "U0123ABC" || !strings.Contains(text, "Step-up required") || link == "" || !strings.Contains(text, "stays pending") {
		t.Fatalf("the step-up answer to the click: %v, want a private answer to U0123ABC with %q, a step-up link and %q", eph.Form, "Step-up required", "stays pending")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("after the refused click: %s, want pending", st)
	}
	if len(f.Calls("chat.update")) != 0 {
		t.Fatal("the card was updated after a refused click")
	}
	audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 50})
	if !strings.Contains(audit.Text, "approve_action: Access denied: step-up required") || !strings.Contains(audit.Text, "dr_smith [U0123ABC]") {
		t.Fatalf("the refused click is not audited as dr_smith:\n%s", audit.Text)
	}

	// The link: Continue -> the provider (prompt=login, max_age=0) -> the
	// item, where dr_smith approves.
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-smith", Email: "dr.smith@hospital.example", EmailVerified: true}, time.Now()})
	smith := person(t)
	browse(t, smith, "follow the step-up link",
		chromedp.Navigate(e.URL+link),
		chromedp.WaitVisible(chromedp.CSS("#stepup-continue")),
		chromedp.Click(chromedp.CSS("#stepup-continue")),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#stepped-up")),
	)
	if loc := read(t, smith, "where the step-up lands", chromedp.Location()); !strings.HasSuffix(loc, "/ui/items/"+itemID) {
		t.Fatalf("after step-up the browser is at %s, want item %s", loc, itemID)
	}
	az := authorizations()
	if len(az) != 1 || az[0].Get("prompt") != "login" || az[0].Get("max_age") != "0" {
		t.Fatalf("the step-up asked the provider with %v, want prompt=login and max_age=0", az)
	}
	browse(t, smith, "approve after step-up, typing the database's name", chromedp.SendKeys(chromedp.CSS("#confirm"), "orders_prod"),
		chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID})
	if st.Data["status"] != "approved" || st.Data["confirmed_by"] != "dr_smith [web:dr_smith]" {
		t.Fatalf("after approving in the console: %s, want approved, confirmed by %q", st, "dr_smith [web:dr_smith]")
	}
	audit = e.MustOK(admin, "audit_log", map[string]any{"limit": 50})
	if !regexp.MustCompile(reqID + ` by dr_smith \[web:dr_smith\] step-up oidc auth_time=\d{4}-`).MatchString(audit.Text) {
		t.Fatalf("the approval's audit entry does not record the step-up:\n%s", audit.Text)
	}
	if !strings.Contains(audit.Text, "signed in via oidc again for step-up (prompt=login)") {
		t.Fatalf("the step-up sign-in is not audited:\n%s", audit.Text)
	}
	// The link worked once.
	other := person(t)
	browse(t, other, "reuse the step-up link", chromedp.Navigate(e.URL+link), chromedp.WaitVisible(chromedp.CSS("#stepup-continue")),
		chromedp.Click(chromedp.CSS("#stepup-continue")), chromedp.WaitVisible(chromedp.CSS(".problem")))
	if msg := read(t, other, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(msg, "already used") {
		t.Errorf("second use of a step-up link: %q, want it to say %q", msg, "already used")
	}

	// A stale auth_time: dr_jones signed in at the provider ten minutes ago
	// and the provider ignores prompt=login.
	stale := time.Now().Add(-10 * time.Minute)
	r2 := e.MustOK(agent, "confirm_action", map[string]any{"tool": "delete_database", "arguments": map[string]any{"db_name": "staging"}, "dry_run": "DROP DATABASE staging"})
	req2, _ := r2.Data["request_id"].(string)
	item2 := fmt.Sprint(r2.Data["item_id"])
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-jones", Email: "dr.jones@hospital.example", EmailVerified: true}, stale})
	jones := person(t)
	browse(t, jones, "dr_jones signs in through the provider",
		chromedp.Navigate(e.URL+"/ui/signin/oidc"),
		chromedp.WaitVisible(chromedp.CSS(".me")),
		chromedp.Navigate(e.URL+"/ui/items/"+item2),
		chromedp.WaitVisible(chromedp.CSS("#stepup")),
	)
	if n := read(t, jones, "approve buttons", chromedp.Evaluate[int](`document.querySelectorAll("#approve").length`)); n != 0 {
		t.Fatal("a session with a stale sign-in is offered Approve")
	}
	// The attack: post the approval anyway, with the session's CSRF token.
	status := read(t, jones, "a forced approval", chromedp.Evaluate[int](`fetch("/ui/items/`+item2+`/decide", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
		body: "action=approve&nonce=forced&csrf=" + encodeURIComponent(document.querySelector('form.stepup input[name="csrf"]').value)}).then(r => r.ok ? 200 : r.status)`, chromedp.EvalAwaitPromise))
	if status != 200 {
		t.Fatalf("the forced approval answered %d, want 200", status)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": req2}); st.Data["status"] != "pending" {
		t.Fatalf("an approval from a stale session went through: %s, want pending", st)
	}
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-jones", Email: "dr.jones@hospital.example", EmailVerified: true}, stale})
	browse(t, jones, "step up against a provider that ignores prompt=login",
		chromedp.Click(chromedp.CSS("#stepup")),
		chromedp.WaitVisible(chromedp.CSS(".problem")),
	)
	if msg := read(t, jones, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(msg, "answered with an earlier sign-in") {
		t.Fatalf("a stale auth_time: %q, want it to say %q", msg, "answered with an earlier sign-in")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": req2}); st.Data["status"] != "pending" {
		t.Fatalf("after a stale step-up: %s, want pending", st)
	}
	audit = e.MustOK(admin, "audit_log", map[string]any{"limit": 50})
	if !strings.Contains(audit.Text, "step-up refused: The identity provider answered with an earlier sign-in") ||
		!strings.Contains(audit.Text, "approve_action: Access denied: step-up required: approve in the console after signing in again. "+req2) ||
		!strings.Contains(audit.Text, "dr_jones [web:dr_jones]'s last oidc was at") {
		t.Fatalf("the stale step-up and the forced approval are not audited:\n%s", audit.Text)
	}

	// Quorum 2: both approvers step up. dr_smith's sign-in is still fresh;
	// dr_jones clicks in Slack and follows the link.
	r3 := e.MustOK(agent, "confirm_action", map[string]any{"tool": "rollback_production", "arguments": map[string]any{"to": "v41"}, "dry_run": "redeploy v41 to 12 hosts"})
	req3, _ := r3.Data["request_id"].(string)
	item3 := fmt.Sprint(r3.Data["item_id"])
	browse(t, smith, "dr_smith approves the rollback",
		chromedp.Navigate(e.URL+"/ui/items/"+item3),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.SendKeys(chromedp.CSS("#confirm"), "v41"), // what the rollback acts on: it cannot be undone
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": req3}); st.Data["status"] != "pending" || !strings.Contains(fmt.Sprint(st.Data["tally"]), "1 of 2") {
		t.Fatalf("after the first stepped-up vote: %s, want pending at %q", st, "1 of 2")
	}
	waitFor(t, "the rollback to be posted", func() bool { return len(f.Calls("chat.postMessage")) >= 3 })
	post3 := f.Calls("chat.postMessage")[2]
	slackClick(t, e, post3, "U0456DEF", item3, "t-su-3")
	waitFor(t, "dr_jones's private step-up answer", func() bool { return len(f.Calls("chat.postEphemeral")) == 2 })
	link3 := stepUpLinkRE.FindString(f.Calls("chat.postEphemeral")[1].Form.Get("text"))
	if link3 == "" {
		t.Fatalf("no link for dr_jones: %v", f.Calls("chat.postEphemeral")[1].Form)
	}
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-jones", Email: "dr.jones@hospital.example", EmailVerified: true}, time.Now()})
	browse(t, jones, "dr_jones steps up from the link and approves",
		chromedp.Navigate(e.URL+link3),
		chromedp.WaitVisible(chromedp.CSS("#stepup-continue")),
		chromedp.Click(chromedp.CSS("#stepup-continue")),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.SendKeys(chromedp.CSS("#confirm"), "v41"),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	st = e.MustOK(agent, "action_status", map[string]any{"request_id": req3})
	if st.Data["status"] != "approved" || st.Data["confirmed_by"] != "dr_smith [web:dr_smith], dr_jones [web:dr_jones]" {
		t.Fatalf("the quorum after both stepped up: %s, want approved, confirmed by %q", st, "dr_smith [web:dr_smith], dr_jones [web:dr_jones]")
	}
	audit = e.MustOK(admin, "audit_log", map[string]any{"limit": 50})
	if !regexp.MustCompile(req3+` approve by dr_smith \[web:dr_smith\]: 1 of 2 approvals: dr_smith step-up oidc auth_time=`).MatchString(audit.Text) ||
		!regexp.MustCompile(req3+` by dr_smith \[web:dr_smith\], dr_jones \[web:dr_jones\] step-up oidc auth_time=`).MatchString(audit.Text) {
		t.Fatalf("the quorum's votes do not record both step-ups:\n%s", audit.Text)
	}

	// The link is bound to its person: dr_smith's link, completed at the
	// provider as dr_jones, is refused.
	r4 := e.MustOK(agent, "confirm_action", map[string]any{"tool": "delete_database", "arguments": map[string]any{"db_name": "qa"}, "dry_run": "DROP DATABASE qa"})
	req4, _ := r4.Data["request_id"].(string)
	item4 := fmt.Sprint(r4.Data["item_id"])
	waitFor(t, "the fourth request to be posted", func() bool { return len(f.Calls("chat.postMessage")) >= 4 })
	slackClick(t, e, f.Calls("chat.postMessage")[3], "U0123ABC", item4, "t-su-4")
	waitFor(t, "dr_smith's second step-up answer", func() bool { return len(f.Calls("chat.postEphemeral")) == 3 })
	link4 := stepUpLinkRE.FindString(f.Calls("chat.postEphemeral")[2].Form.Get("text"))
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-jones", Email: "dr.jones@hospital.example", EmailVerified: true}, time.Now()})
	stranger := person(t)
	browse(t, stranger, "complete dr_smith's link as dr_jones",
		chromedp.Navigate(e.URL+link4),
		chromedp.WaitVisible(chromedp.CSS("#stepup-continue")),
		chromedp.Click(chromedp.CSS("#stepup-continue")),
		chromedp.WaitVisible(chromedp.CSS(".problem")),
	)
	if msg := read(t, stranger, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(msg, "You signed in at the identity provider as dr_jones, but this step-up was started for dr_smith") {
		t.Fatalf("a link completed as someone else: %q, want it to say %q", msg, "You signed in at the identity provider as dr_jones, but this step-up was started for dr_smith")
	}
	// A provider that sends no auth_time cannot complete a step-up.
	plain := person(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-jones", Email: "dr.jones@hospital.example", EmailVerified: true})
	m.QueueUser(&mockoidc.MockUser{Subject: "u-jones", Email: "dr.jones@hospital.example", EmailVerified: true})
	browse(t, plain, "step up against a provider without auth_time",
		chromedp.Navigate(e.URL+"/ui/signin/oidc"),
		chromedp.WaitVisible(chromedp.CSS(".me")),
		chromedp.Navigate(e.URL+"/ui/items/"+item4),
		chromedp.WaitVisible(chromedp.CSS("#stepup")),
		chromedp.Click(chromedp.CSS("#stepup")),
		chromedp.WaitVisible(chromedp.CSS(".problem")),
	)
	if msg := read(t, plain, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(msg, "no auth_time claim in the ID token") {
		t.Fatalf("no auth_time: %q, want it to say %q", msg, "no auth_time claim in the ID token")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": req4}); st.Data["status"] != "pending" {
		t.Fatalf("after the refused step-ups: %s, want pending", st)
	}
}

// slackItemID is the item id on a posted card.
func slackItemID(t *testing.T, post slackCall) string {
	t.Helper()
	var parsed []map[string]any
	_ = json.Unmarshal([]byte(post.Form.Get("blocks")), &parsed)
	for _, b := range parsed {
		if id, ok := strings.CutPrefix(fmt.Sprint(b["block_id"]), "countersign:"); ok {
			return id
		}
	}
	t.Fatalf("no item id on the card:\n%s", post.Form.Get("blocks"))
	return ""
}

// slackClick posts a signed Approve click on a card as user, as Slack
// sends it: the button's value as the card has it (after its confirmation
// dialog, on a dangerous item), and the card.
func slackClick(t *testing.T, e *testEnv, post slackCall, user, itemID, trigger string) {
	t.Helper()
	var blocks []map[string]any
	_ = json.Unmarshal([]byte(post.Form.Get("blocks")), &blocks)
	value := itemID
	for _, b := range blocks {
		els, _ := b["elements"].([]any)
		for _, el := range els {
			if el, _ := el.(map[string]any); el["action_id"] == "countersign.approve" {
				value, _ = el["value"].(string)
			}
		}
	}
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": trigger, "user": map[string]any{"id": user, "team_id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": post.Form.Get("channel"), "message_ts": post.TS},
		"message":   map[string]any{"ts": post.TS, "blocks": blocks},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + itemID, "value": value, "action_ts": "1.1"}},
	})
	if code, _ := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("click answered %d, want %d", code, http.StatusOK)
	}
}

// TestStepUpDiscordClick: a Discord click on a step-up item is answered
// privately with the one-time console link (Discord's ephemeral flag),
// the refusal is audited and the item stays pending; the card says it
// needs step-up.
func TestStepUpDiscordClick(t *testing.T) {
	t.Parallel()
	fake := discordtest.New(t, discordToken)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(discordConfig(fake, "http"), "    discord: \"111\"\n", "    discord: \"111\"\n    web: dr.smith@hospital.example\n", 1) + `step_up:
  categories: [destructive]
web:
  public_url: https://countersign.hospital.example
  oidc:
    issuer: https://login.hospital.example
    client_id: countersign
    client_secret_env: OIDC_SECRET
`
	e := newTestEnv(t, cfg)
	e.env["DISCORD_BOT_TOKEN"], e.env["DISCORD_PUBLIC_KEY"], e.env["OIDC_SECRET"] = discordToken, hex.EncodeToString(pub), "s3cret"
	d := &discordEnv{testEnv: e, fake: fake, key: priv}
	d.agent = e.CreateKey("intake_agent", "agent")
	admin := e.CreateKey("root", "admin")
	e.Start()

	req := d.MustOK(d.agent, "confirm_action", map[string]any{"tool": "delete_database", "arguments": map[string]any{"db_name": "orders_prod"}, "dry_run": "drop 41 tables"})
	reqID, _ := req.Data["request_id"].(string)
	msg, item := d.posted(discordOps, "fresh sign-in")
	r := d.click("su1", discordtest.Clicker{UserID: "111", GuildID: discordGuild}, discordOps, msg, "cs:approve:"+item)
	text := fmt.Sprint(r)
	if discordRespType(r) != 4 || discordFlags(r)&64 == 0 || !strings.Contains(text, "https://countersign.hospital.example/ui/stepup?t=") || !strings.Contains(text, "stays pending") {
		t.Fatalf("a Discord click on a step-up item answered %v, want a private reply with the step-up link", r)
	}
	if st := d.MustOK(d.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("after the click: %s, want pending", st)
	}
	if a := d.MustOK(admin, "audit_log", map[string]any{"limit": 20}); !strings.Contains(a.Text, "approve_action: Access denied: step-up required") {
		t.Fatalf("the refused click is not audited:\n%s", a.Text)
	}
}
