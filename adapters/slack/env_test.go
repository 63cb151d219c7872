package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/countersign/countersign/adapters/slack/slacktest"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

const (
	testSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	team       = "T1"       // the workspace of the mapped users
	drSmith    = "U0123ABC" // member
	nurseJo    = "U0456DEF" // member
	viewerVic  = "U0789VIC" // viewer: no approve capability
	stranger   = "U0999XYZ" // not mapped
	chDefault  = "C0DEFAULT"
	chOps      = "C0OPS"
)

// env is a real bot on a bbolt file in a temp dir, the Slack adapter in
// front of it, the fake Slack behind it and the adapter's HTTP handlers on a
// loopback port.
type env struct {
	t     *testing.T
	path  string
	clock *bottest.Clock
	db    *bolt.DB
	bot   *bot.Bot
	ad    *Adapter
	fake  *slacktest.Server
	srv   *httptest.Server
	opts  func(*Options)
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	cmds  chan commandCall
}

// commandCall is what the injected slash-command runner received.
type commandCall struct {
	Caller *bot.Caller
	UserID string
	Text   string
}

func newEnv(t *testing.T, opts ...func(*Options)) *env {
	t.Helper()
	e := &env{
		t: t, path: filepath.Join(t.TempDir(), "countersign.db"),
		clock: bottest.NewClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)),
		fake:  slacktest.New(t),
		cmds:  make(chan commandCall, 16),
	}
	e.opts = func(o *Options) {
		for _, fn := range opts {
			fn(o)
		}
	}
	e.open()
	t.Cleanup(e.close)
	return e
}

// open builds the store, bot and adapter and starts one click worker (one
// worker keeps clicks in order, so barrier() means "all earlier clicks done").
func (e *env) open() {
	t := e.t
	t.Helper()
	db, err := bolt.Open(e.path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := testbot.New(t, bot.Options{Store: db, Now: e.clock.Now, Sinks: []string{Sink}})
	if err := registerTestKinds(b); err != nil {
		t.Fatal(err)
	}
	dir, err := bot.NewDirectory([]bot.ChatPrincipal{
		{Name: "dr_smith", Role: policy.RoleMember, Slack: team + "/" + drSmith},
		{Name: "nurse_jo", Role: policy.RoleMember, Slack: team + "/" + nurseJo},
		{Name: "viewer_vic", Role: policy.RoleViewer, Slack: team + "/" + viewerVic},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Chat().SetDirectory(dir)
	o := Options{
		Bot: b, Mode: ModeHTTP, BotToken: "xoxb-test", SigningSecret: testSecret, AppToken: "",
		APIURL: e.fake.URL(), Channels: map[string]string{"default": chDefault, "ops": chOps},
		Approvers:   []string{team + "/" + drSmith, team + "/" + nurseJo},
		RoleMembers: map[string][]string{"member": {drSmith, nurseJo}, "admin": nil},
		HTTPClient:  slacktest.Client(), Dialer: slacktest.Dialer(), Workers: 1,
		Commands: func(ctx context.Context, caller *bot.Caller, userID, text string) chat.Reply {
			e.cmds <- commandCall{Caller: caller, UserID: userID, Text: text}
			return chat.Reply{Text: "ran <" + text + "> @here", Private: true}
		},
	}
	e.opts(&o)
	ad, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.db, e.bot, e.ad = db, b, ad
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx, e.stop = ctx, cancel
	e.wg.Go(func() { ad.work(ctx) })
	if o.Mode == ModeSocket {
		e.wg.Go(func() { ad.runSocket(ctx) })
	}
	mux := http.NewServeMux()
	mux.Handle("POST /slack/interactions", ad.InteractionsHandler())
	mux.Handle("POST /slack/commands", ad.CommandsHandler())
	e.srv = httptest.NewServer(mux)
}

// close stops the adapter and closes the store (a shutdown).
func (e *env) close() {
	if e.db == nil {
		return
	}
	e.srv.Close()
	e.stop()
	e.wg.Wait()
	if err := e.db.Close(); err != nil {
		e.t.Error(err)
	}
	e.db = nil
}

// barrier waits until the click worker has finished every job queued before it.
func (e *env) barrier() {
	e.t.Helper()
	done := make(chan struct{})
	e.ad.jobs <- func(context.Context) { close(done) }
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		e.t.Fatal("click worker stuck")
	}
}

// drain delivers every due outbox event to the fake Slack.
func (e *env) drain() {
	e.t.Helper()
	if err := e.bot.Outbox().Drain(context.Background(), Sink, e.bot.Outbox().DeliverTo(Sink, e.ad.Renderer())); err != nil {
		e.t.Fatal(err)
	}
}

// deliver delivers one event to the fake Slack as the outbox worker does,
// and returns its failure (classified, not yet acted on).
func (e *env) deliver(ev bot.Event) error {
	return e.bot.Outbox().DeliverTo(Sink, e.ad.Renderer())(context.Background(), ev)
}

func (e *env) create(kind bot.ItemKind, channel string, t testItem) uint64 {
	e.t.Helper()
	id, err := createTestItem(context.Background(), e.bot, kind, channel, t)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) item(id uint64) bot.Item {
	e.t.Helper()
	it, err := e.bot.Items().Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return it
}

func (e *env) state(id uint64) testItem {
	e.t.Helper()
	s, err := testItemState(context.Background(), e.bot, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// ref returns the item's one Slack message.
func (e *env) ref(id uint64) bot.MessageRef {
	e.t.Helper()
	rs := refs(e.item(id))
	if len(rs) != 1 {
		e.t.Fatalf("item %d has %d slack messages, want 1", id, len(rs))
	}
	return rs[0]
}

// audit returns the audit chain.
func (e *env) audit() []approvals.Entry {
	e.t.Helper()
	var out []approvals.Entry
	err := e.bot.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend("audit", nil, nil, func(k, v []byte) error {
			en, err := approvals.DecodeRow(k, v)
			if err != nil {
				return err
			}
			out = append(out, en)
			return nil
		})
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// denials returns the access_denied audit entries.
func (e *env) denials() []approvals.Entry {
	var out []approvals.Entry
	for _, en := range e.audit() {
		if en.Action == "access_denied" {
			out = append(out, en)
		}
	}
	return out
}

func sign(secret string, ts int64, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:%s", ts, body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// post sends a form to the adapter, signed at ts with secret.
func (e *env) post(path string, form url.Values, secret string, ts time.Time) (int, string) {
	e.t.Helper()
	body := form.Encode()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("X-Slack-Signature", sign(secret, ts.Unix(), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// interact posts an interaction payload, correctly signed now.
func (e *env) interact(payload any) (int, string) {
	e.t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.post("/slack/interactions", url.Values{"payload": {string(b)}}, testSecret, time.Now())
}

var triggerSeq struct {
	sync.Mutex
	n int
}

func newTrigger() string {
	triggerSeq.Lock()
	defer triggerSeq.Unlock()
	triggerSeq.n++
	return fmt.Sprintf("trig-%d", triggerSeq.n)
}

// clickPayload is a block_actions payload: user pressed the button
// action_id with value on the message ref.
func clickPayload(user, actionID, value string, ref bot.MessageRef, trigger string) map[string]any {
	id, _, _ := strings.Cut(value, ":")
	return map[string]any{
		"type":       "block_actions",
		"trigger_id": trigger,
		"user":       map[string]any{"id": user, "team_id": "T1"},
		"team":       map[string]any{"id": "T1"},
		"container":  map[string]any{"type": "message", "channel_id": ref.ChannelID, "message_ts": ref.MessageID},
		"channel":    map[string]any{"id": ref.ChannelID},
		"actions": []any{map[string]any{
			"type": "button", "action_id": actionID, "block_id": blockPrefix + id, "value": value, "action_ts": "1767225601.000001",
		}},
	}
}

// submitPayload is a view_submission of the reason modal.
func submitPayload(user, metadata, reason, trigger string) map[string]any {
	return map[string]any{
		"type":       "view_submission",
		"trigger_id": trigger,
		"user":       map[string]any{"id": user},
		"team":       map[string]any{"id": "T1"},
		"view": map[string]any{
			"id": "V" + trigger, "callback_id": callbackReject, "private_metadata": metadata,
			"state": map[string]any{"values": map[string]any{reasonBlock: map[string]any{reasonAction: map[string]any{"type": "plain_text_input", "value": reason}}}},
		},
	}
}

// ephemerals returns the private answers sent to user.
func (e *env) ephemerals(user string) []slacktest.Call {
	var out []slacktest.Call
	for _, c := range e.fake.Calls("chat.postEphemeral") {
		if c.Form.Get("user") == user {
			out = append(out, c)
		}
	}
	return out
}

// eventually polls cond until it holds or 10 s pass: it waits for an
// asynchronous effect; it never asserts how fast it happened.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s, want %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
