package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack/slacktest"
)

// slackFake is Slack's Web API (and Socket Mode) on 127.0.0.1 for the
// end-to-end tests: it records every call under a mutex.
type slackFake struct {
	srv    *slacktest.Server
	mu     sync.Mutex
	calls  []slackCall
	acks   []map[string]any
	seq    int
	frames chan string
}

type slackCall struct {
	Method string
	Form   url.Values
	JSON   map[string]any // JSON methods (views.open)
	Auth   string
	TS     string // the ts the fake answered with
}

func newSlackFake(t *testing.T) *slackFake {
	t.Helper()
	f := &slackFake{frames: make(chan string, 16)}
	f.srv = slacktest.NewTestServer(func(c slacktest.Customize) {
		for _, m := range []string{"chat.postMessage", "chat.update", "chat.postEphemeral", "views.open", "apps.connections.open", "conversations.open"} {
			c.Handle("/"+m, f.handle(m))
		}
		c.Handle("/ws", f.socket)
	})
	f.srv.Start()
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *slackFake) handle(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := slackCall{Method: method, Auth: r.Header.Get("Authorization")}
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			_ = r.ParseForm()
			c.Form = r.PostForm
		} else {
			_ = json.NewDecoder(r.Body).Decode(&c.JSON)
		}
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.seq++
		ts := fmt.Sprintf("1767225600.%06d", f.seq)
		f.calls[len(f.calls)-1].TS = ts
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		resp := map[string]any{"ok": true, "channel": c.Form.Get("channel"), "ts": ts, "message_ts": ts}
		if method == "apps.connections.open" {
			resp["url"] = "ws://" + f.srv.ServerAddr + "/ws"
		}
		if method == "conversations.open" { // the direct message with users
			resp["channel"] = map[string]any{"id": "D" + c.Form.Get("users")}
		}
		_ = json.NewEncoder(w).Encode(resp)
	}
}

func (f *slackFake) socket(w http.ResponseWriter, r *http.Request) {
	conn, err := (&websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var m map[string]any
			if conn.ReadJSON(&m) != nil {
				return
			}
			f.mu.Lock()
			f.acks = append(f.acks, m)
			f.mu.Unlock()
		}
	}()
	if conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello"}`)) != nil {
		return
	}
	ping := time.NewTicker(100 * time.Millisecond)
	defer ping.Stop()
	for {
		select {
		case <-done:
			return
		case <-ping.C:
			if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second)) != nil {
				return
			}
		case fr := <-f.frames:
			if conn.WriteMessage(websocket.TextMessage, []byte(fr)) != nil {
				return
			}
		}
	}
}

func (f *slackFake) Calls(method string) []slackCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slackCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func (f *slackFake) Acks() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.acks...)
}

// waitFor polls cond for an asynchronous effect (10 s at most).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitCountedAnswer waits for the private answer Slack's click worker
// posts to user after their vote was counted and the item still waits
// for others ("… is recorded; it still needs others."). It is posted
// after the deciding transaction commits, so a vote that already shows
// in action_status may not have its answer yet: a test that next counts
// the private answers, to read the one a later click gets, waits for it
// first.
func waitCountedAnswer(t *testing.T, f *slackFake, user string) {
	t.Helper()
	waitFor(t, "the private answer to "+user+"'s counted vote", func() bool {
		for _, c := range f.Calls("chat.postEphemeral") {
			if c.Form.Get("user") == user && strings.Contains(c.Form.Get("text"), "is recorded; it still needs others") {
				return true
			}
		}
		return false
	})
}

// slackJSON undoes json.Marshal's HTML escapes so that live markup cannot
// hide from a substring check.
func slackJSON(s string) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(s)
}

const e2eSlackSecret = "e2e-signing-secret"

// postSlack posts a form to the server signed with the signing secret.
func postSlack(t *testing.T, base, path string, form url.Values, secret string) (int, string) {
	t.Helper()
	body := form.Encode()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func slackConfig(f *slackFake, mode string) string {
	return `memory:
  slots:
    - name: code_status
      category: code_status
      confirm: true
slack:
  mode: ` + mode + `
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  app_token_env: SLACK_APP_TOKEN
  api_url: ` + f.srv.GetAPIURL() + `
  channels: {default: C0DEFAULT, ops: C0OPS}
tools:
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
    approvers: {roles: [member, admin]}
    channels: [ops]
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
`
}

func TestSlackStartupNeedsItsSecrets(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "http"))
	var errb bytes.Buffer
	err := run(context.Background(), []string{"serve", "--config", e.cfg}, e.getenv, strings.NewReader(""), io.Discard, &errb)
	if err == nil || !strings.Contains(err.Error(), "SLACK_BOT_TOKEN") || !strings.Contains(err.Error(), "SLACK_SIGNING_SECRET") {
		t.Fatalf("serve without the Slack secrets: %v, want both variables named", err)
	}
	e2 := newTestEnv(t, slackConfig(f, "socket"))
	e2.env["SLACK_BOT_TOKEN"] = "xoxb-e2e"
	err = run(context.Background(), []string{"serve", "--config", e2.cfg}, e2.getenv, strings.NewReader(""), io.Discard, &errb)
	if err == nil || !strings.Contains(err.Error(), "SLACK_APP_TOKEN") {
		t.Fatalf("socket mode without the app token: %v, want an error naming SLACK_APP_TOKEN", err)
	}
}

// TestSlackApprovesMemoryProposalEndToEnd: an agent's change to a confirm
// slot is posted to Slack with inert text, a mapped member's signed click
// approves it as dr_smith [U0123ABC], and the message is updated in place.
func TestSlackApprovesMemoryProposalEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "http"))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("intake", "agent")
	e.Start()

	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "full code", "text": "She is full code."})
	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "DNR <!channel> @everyone", "text": "Make her DNR <@U0123ABC>"})
	waitFor(t, "the proposal to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	blocks := slackJSON(post.Form.Get("blocks"))
	if post.Form.Get("channel") != "C0DEFAULT" || post.Form.Get("token") != "xoxb-e2e" {
		t.Fatalf("posted %v, want channel C0DEFAULT and token xoxb-e2e", post.Form)
	}
	for _, bad := range []string{"<!channel>", "@everyone", "<@U0123ABC>"} {
		if strings.Contains(blocks, bad) {
			t.Errorf("posted message holds live markup %q:\n%s", bad, blocks)
		}
	}
	if !strings.Contains(blocks, "&lt;!channel&gt;") || !strings.Contains(blocks, "full code") {
		t.Errorf("posted message lacks the proposal:\n%s", blocks)
	}
	var parsed []map[string]any
	if err := json.Unmarshal([]byte(post.Form.Get("blocks")), &parsed); err != nil {
		t.Fatal(err)
	}
	var itemID string
	for _, b := range parsed {
		if b["type"] == "actions" {
			for _, el := range b["elements"].([]any) {
				if m := el.(map[string]any); m["action_id"] == "countersign.approve" {
					itemID = m["value"].(string)
				}
			}
		}
	}
	if itemID == "" {
		t.Fatalf("no Approve button:\n%s", blocks)
	}

	click := func(user, trigger string) string {
		p, _ := json.Marshal(map[string]any{
			"type": "block_actions", "trigger_id": trigger,
			"user": map[string]any{"id": user}, "team": map[string]any{"id": "T1"},
			"container": map[string]any{"type": "message", "channel_id": "C0DEFAULT", "message_ts": post.TS},
			"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + itemID, "value": itemID, "action_ts": "1.1"}},
		})
		return string(p)
	}
	if code, _ := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {click("U0123ABC", "t1")}}, "not-the-secret"); code != http.StatusUnauthorized {
		t.Fatalf("badly signed click answered %d, want 401", code)
	}
	if code, _ := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {click("U0NOBODY", "t2")}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("unmapped click answered %d, want %d", code, http.StatusOK)
	}
	waitFor(t, "the unmapped clicker's private refusal", func() bool { return len(f.Calls("chat.postEphemeral")) == 1 })
	if eph := f.Calls("chat.postEphemeral")[0]; eph.Form.Get("user") != "U0NOBODY" || !strings.Contains(eph.Form.Get("text"), "not mapped") {
		t.Errorf("refusal: %v, want a private answer to U0NOBODY saying %q", eph.Form, "not mapped")
	}

	if code, _ := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {click("U0123ABC", "t3")}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("click answered %d, want %d", code, http.StatusOK)
	}
	waitFor(t, "the click to be answered or applied", func() bool {
		return len(f.Calls("chat.update")) == 1 || len(f.Calls("chat.postEphemeral")) > 1
	})
	if eph := f.Calls("chat.postEphemeral"); len(eph) > 1 {
		t.Fatalf("dr_smith's click was refused (is the principals map wired into the bot's directory?): %s", eph[1].Form.Get("text"))
	}
	up := f.Calls("chat.update")[0]
	ub := slackJSON(up.Form.Get("blocks"))
	if up.Form.Get("ts") != post.TS || !strings.Contains(ub, "*Approved* by dr_smith (chat click) on") || strings.Contains(ub, `"actions"`) {
		t.Fatalf("updated message: ts %s, want ts %s with %q and no actions:\n%s", up.Form.Get("ts"), post.TS, "*Approved* by dr_smith (chat click) on", ub)
	}
	if r := e.MustOK(agent, "pending_changes", map[string]any{}); !strings.Contains(r.Text, "No changes awaiting approval") {
		t.Errorf("pending_changes after the click: %s, want %q", r.Text, "No changes awaiting approval")
	}
}

// TestSlackApprovesDestructiveActionEndToEnd: a destructive action request
// is posted to its tool's channel with its dry-run plan, and a click makes
// dr_smith [U0123ABC] its confirmed_by.
func TestSlackApprovesDestructiveActionEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "http"))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()

	r := e.MustOK(agent, "confirm_action", map[string]any{
		"tool": "delete_database", "arguments": map[string]any{"db_name": "orders_prod"},
		"summary": "Drop orders_prod after the migration. @here", "dry_run": "DROP DATABASE orders_prod; -- 42 tables",
		"requested_effects": []string{"drop database orders_prod"},
	})
	reqID, _ := r.Data["request_id"].(string)
	waitFor(t, "the request to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	blocks := slackJSON(post.Form.Get("blocks"))
	if post.Form.Get("channel") != "C0OPS" {
		t.Errorf("posted to %s, want the ops channel", post.Form.Get("channel"))
	}
	for _, want := range []string{"delete_database", "DROP DATABASE orders_prod; -- 42 tables", "orders_prod", "drop database orders_prod", "deploy_bot", "Expires <!date^", `"countersign.approve"`, `"countersign.reject"`} {
		if !strings.Contains(blocks, want) {
			t.Errorf("posted request lacks %q:\n%s", want, blocks)
		}
	}
	if strings.Contains(blocks, "@here") {
		t.Errorf("posted request holds a live @here:\n%s", blocks)
	}
	var itemID string
	var parsed []map[string]any
	_ = json.Unmarshal([]byte(post.Form.Get("blocks")), &parsed)
	for _, b := range parsed {
		if id, ok := strings.CutPrefix(fmt.Sprint(b["block_id"]), "countersign:"); ok {
			itemID = id
		}
	}
	// The card's Approve is the dangerous action: red, behind a dialog
	// naming what runs on what; Reject is not red.
	var approveValue string
	for _, b := range parsed {
		els, _ := b["elements"].([]any)
		for _, el := range els {
			el, _ := el.(map[string]any)
			switch el["action_id"] {
			case "countersign.approve":
				approveValue, _ = el["value"].(string)
				confirm, _ := el["confirm"].(map[string]any)
				if el["style"] != "danger" || !strings.Contains(fmt.Sprint(confirm["text"]), "delete_database runs once on db_name orders_prod and cannot be undone") || confirm["style"] != "danger" {
					t.Errorf("the destructive Approve: %v, want style danger and a danger confirm saying %q", el, "delete_database runs once on db_name orders_prod and cannot be undone")
				}
			case "countersign.reject":
				if el["style"] != nil {
					t.Errorf("the Reject of a destructive request is styled %v, want no style", el["style"])
				}
			}
		}
	}
	clickWith := func(trigger, value string) {
		t.Helper()
		var msgBlocks any
		_ = json.Unmarshal([]byte(post.Form.Get("blocks")), &msgBlocks)
		p, _ := json.Marshal(map[string]any{
			"type": "block_actions", "trigger_id": trigger, "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
			"container": map[string]any{"type": "message", "channel_id": "C0OPS", "message_ts": post.TS},
			"message":   map[string]any{"ts": post.TS, "blocks": msgBlocks},
			"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + itemID, "value": value, "action_ts": "1.1"}},
		})
		if code, _ := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret); code != http.StatusOK {
			t.Fatalf("click answered %d, want %d", code, http.StatusOK)
		}
	}
	// A click that did not come through the dialog (a button without its
	// mark: an old card, a forged value) decides nothing.
	clickWith("t-bare", itemID)
	waitFor(t, "the bare click to be answered", func() bool { return len(f.Calls("chat.postEphemeral")) == 1 })
	if msg := f.Calls("chat.postEphemeral")[0].Form.Get("text"); !strings.Contains(msg, "takes a confirmation") {
		t.Fatalf("a click without the confirmation: %q, want it to say %q", msg, "takes a confirmation")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("a click without the confirmation decided: %s, want pending", st)
	}
	clickWith("t-act", approveValue)
	waitFor(t, "the message to be updated", func() bool { return len(f.Calls("chat.update")) == 1 })
	if ub := slackJSON(f.Calls("chat.update")[0].Form.Get("blocks")); !strings.Contains(ub, "*Approved* by dr_smith (chat click) on") || strings.Contains(ub, "countersign.approve") {
		t.Fatalf("updated request, want %q and no countersign.approve:\n%s", "*Approved* by dr_smith (chat click) on", ub)
	}
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID})
	if st.Data["status"] != "approved" || st.Data["confirmed_by"] != "dr_smith [U0123ABC]" {
		t.Fatalf("action_status after the click: %s, want approved, confirmed by %q", st, "dr_smith [U0123ABC]")
	}
	// The vote records what dr_smith was shown: the SHA-256 of the card's
	// text as Slack sent it back (every text of its blocks, in order, one
	// a line), whole.
	votes, _ := st.Data["votes"].([]any)
	if len(votes) != 1 {
		t.Fatalf("votes: %v, want 1", st.Data["votes"])
	}
	seen, _ := votes[0].(map[string]any)["seen"].(map[string]any)
	if seen["surface"] != "slack" || seen["truncated"] != false || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(fmt.Sprint(seen["sha256"])) {
		t.Fatalf("the vote's seen: %v, want surface slack, truncated false, a hex sha256", seen)
	}
	if want := sha256Hex(strings.Join(slackTexts(t, post.Form.Get("blocks")), "\n")); seen["sha256"] != want {
		t.Fatalf("the vote's seen sha256 %v, want the hash of the card posted (%s)", seen["sha256"], want)
	}
}

// slackTexts are the string values of every "text" key of a Slack blocks
// document, in document order: the card's text.
func slackTexts(t *testing.T, blocks string) []string {
	t.Helper()
	var out []string
	var walk func(dec *json.Decoder, key string) error
	walk = func(dec *json.Decoder, key string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Delim:
			for dec.More() {
				k := ""
				if v == '{' {
					kt, err := dec.Token()
					if err != nil {
						return err
					}
					k = kt.(string)
				}
				if err := walk(dec, k); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case string:
			if key == "text" {
				out = append(out, v)
			}
		}
		return nil
	}
	if err := walk(json.NewDecoder(strings.NewReader(blocks)), ""); err != nil {
		t.Fatalf("the posted blocks: %v", err)
	}
	return out
}

// sha256Hex is the hex SHA-256 of s.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestSlackSlashCommandEndToEnd: /countersign reaches package chat and its answer
// comes back in the response body.
func TestSlackSlashCommandEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "http"))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	e.Start()
	form := url.Values{"team_id": {"T1"}, "user_id": {"U0123ABC"}, "channel_id": {"C0DEFAULT"}, "command": {"/countersign"}, "text": {"help"}, "trigger_id": {"t-help"}}
	code, body := postSlack(t, e.URL, "/slack/commands", form, e2eSlackSecret)
	var resp struct {
		ResponseType string `json:"response_type"`
		Text         string `json:"text"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusOK || resp.Text == "" ||
		(resp.ResponseType != "ephemeral" && resp.ResponseType != "in_channel") {
		t.Fatalf("slash command answered %d %s, want %d, JSON with a text, response_type ephemeral or in_channel", code, body, http.StatusOK)
	}
	if code, _ := postSlack(t, e.URL, "/slack/commands", form, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("badly signed command answered %d, want 401", code)
	}
}

// TestSlackSocketModeEndToEnd: in socket mode the server opens the socket
// with the app-level token and answers a slash command in the ack.
func TestSlackSocketModeEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "socket"))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_APP_TOKEN"] = "xoxb-e2e", "xapp-e2e"
	e.Start()
	waitFor(t, "the socket to open", func() bool { return len(f.Calls("apps.connections.open")) >= 1 })
	if a := f.Calls("apps.connections.open")[0].Auth; a != "Bearer xapp-e2e" {
		t.Errorf("apps.connections.open authorised with %q, want %q", a, "Bearer xapp-e2e")
	}
	f.frames <- `{"type":"slash_commands","envelope_id":"env-1","accepts_response_payload":true,"payload":{"user_id":"U0123ABC","channel_id":"C0DEFAULT","command":"/countersign","text":"help","trigger_id":"t1"}}`
	waitFor(t, "the acknowledgement", func() bool {
		for _, a := range f.Acks() {
			if a["envelope_id"] == "env-1" {
				return true
			}
		}
		return false
	})
	for _, a := range f.Acks() {
		if a["envelope_id"] == "env-1" {
			p, _ := a["payload"].(map[string]any)
			if p == nil || p["text"] == "" {
				t.Fatalf("command acknowledged without an answer: %v", a)
			}
		}
	}
	// No HTTP endpoints in socket mode.
	if code, _ := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {"{}"}}, "x"); code != http.StatusNotFound {
		t.Errorf("POST /slack/interactions in socket mode answered %d, want 404", code)
	}
}
