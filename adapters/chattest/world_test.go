package chattest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/kv/kvtest"
	"github.com/countersign/countersign/policy"
)

// t0 is the world's clock at its start.
var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// person is one of the people of the tests; each surface names them with
// its own ids.
type person int

const (
	approver person = iota // dr_smith, a member: may approve
	second                 // nurse_jo, a member: may approve
	viewer                 // viewer_vic, a viewer: may not approve
	stranger               // nobody the directory maps
)

// names are the principals the directory maps the people to.
var names = map[person]string{approver: "dr_smith", second: "nurse_jo", viewer: "viewer_vic"}

// world is a real bot on a bbolt file with the real action tools, a fixed
// clock, and the people mapped on every surface; a surface is put in
// front of it.
type world struct {
	t     *testing.T
	sink  string
	path  string
	db    *bolt.DB
	clock *bottest.Clock
	bot   *bot.Bot
	tools *actiontools.Service
	agent *bot.Caller // deploy_bot, the agent that asks
	// requests are the request ids of the questions asked, by item.
	requests map[uint64]string
}

// ids are the surface ids of the people (a stranger's included, though
// the directory does not map it).
type ids struct {
	slack   map[person]string // Slack user ids in workspace slackTeam
	discord map[person]string // Discord user ids
	teams   map[person]string // Entra object ids
}

var people = ids{
	slack:   map[person]string{approver: "U0123ABC", second: "U0456DEF", viewer: "U0789VIC", stranger: "U0999XYZ"},
	discord: map[person]string{approver: "111", second: "444", viewer: "333", stranger: "999"},
	teams: map[person]string{
		approver: "00000000-0000-0000-0000-000000000001", second: "00000000-0000-0000-0000-000000000004",
		viewer: "00000000-0000-0000-0000-000000000003", stranger: "00000000-0000-0000-0000-000000000009",
	},
}

const slackTeam = "T1"

// newWorld builds the bot for sink (the surface's outbox sink) on a
// bbolt file in a temporary directory, every write run twice
// (kvtest.Twice).
func newWorld(t *testing.T, sink string) *world {
	t.Helper()
	w := &world{t: t, clock: bottest.NewClock(t0), sink: sink, path: filepath.Join(t.TempDir(), "countersign.db"), requests: map[uint64]string{}}
	w.open()
	t.Cleanup(w.close)
	w.agent = w.principal("deploy_bot", policy.RoleAgent, "agent")
	return w
}

// open opens the store and builds the bot, its tools and its directory
// on it: at the start, and again after close (a restart).
func (w *world) open() {
	t := w.t
	t.Helper()
	db, err := bolt.Open(w.path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.db = db
	w.bot = testbot.New(t, bot.Options{Store: kvtest.Twice(db), Now: w.clock.Now, Sinks: []string{w.sink}})
	s, err := actiontools.Register(w.bot, actiontools.Options{Tools: []actiontools.ToolSpec{
		{Name: "restart_service", Category: "mutating", Schema: map[string]any{"type": "object", "required": []any{"service"}},
			Approvers: approvals.Approvers{Roles: []string{"member", "admin"}}, Timeout: 30 * time.Minute, Channels: []string{"ops"}},
		{Name: "scale_service", Category: "mutating", Schema: map[string]any{"type": "object", "required": []any{"service"}},
			Approvers: approvals.Approvers{Roles: []string{"member", "admin"}}, Quorum: 2, Timeout: 30 * time.Minute, Channels: []string{"ops"}},
		{Name: "record_diagnosis", Category: "mutating", Sensitive: true, Schema: map[string]any{"type": "object", "required": []any{"diagnosis"}},
			Approvers: approvals.Approvers{Roles: []string{"member", "admin"}}, Timeout: 30 * time.Minute, Channels: []string{"ops"}},
		{Name: "delete_database", Category: "destructive", Schema: map[string]any{"type": "object", "required": []any{"db_name"}},
			Approvers: approvals.Approvers{Roles: []string{"member", "admin"}}, Timeout: 30 * time.Minute, Channels: []string{"ops"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.tools = s
	var dir []bot.ChatPrincipal
	for _, p := range []person{approver, second, viewer} {
		role := policy.RoleMember
		if p == viewer {
			role = policy.RoleViewer
		}
		dir = append(dir, bot.ChatPrincipal{Name: names[p], Role: role,
			Slack: slackTeam + "/" + people.slack[p], Discord: people.discord[p], Teams: people.teams[p]})
	}
	d, err := bot.NewDirectory(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.bot.Chat().SetDirectory(d)
}

// close closes the store; the surface in front of it must be stopped.
func (w *world) close() {
	if w.db == nil {
		return
	}
	if err := w.db.Close(); err != nil {
		w.t.Error(err)
	}
	w.db = nil
}

// principal creates a principal with an API key and returns its caller.
func (w *world) principal(name string, role policy.Role, kind string) *bot.Caller {
	w.t.Helper()
	var key string
	err := w.bot.Update(context.Background(), w.bot.SystemCall(w.clock.Now()), func(tx *bot.Tx) error {
		_, k, err := bot.CreatePrincipal(tx, w.clock.Now(), name, role, kind, nil)
		key = k
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	c, err := w.bot.Authenticate(context.Background(), key)
	if err != nil {
		w.t.Fatal(err)
	}
	c.Surface = "http"
	return c
}

// request has by ask for tool with args through confirm_action and
// returns the item its card is.
func (w *world) request(by *bot.Caller, tool string, args map[string]any) uint64 {
	w.t.Helper()
	raw, err := json.Marshal(map[string]any{"tool": tool, "arguments": args, "summary": "asked by the tests", "dry_run": "the plan of " + tool})
	if err != nil {
		w.t.Fatal(err)
	}
	res, err := w.bot.Call(context.Background(), by, "confirm_action", raw)
	if err != nil {
		w.t.Fatalf("confirm_action %s: %v, want a pending request", tool, err)
	}
	data, _ := json.Marshal(res.Data)
	var d struct {
		RequestID string `json:"request_id"`
		Status    string `json:"status"`
	}
	if err := json.Unmarshal(data, &d); err != nil || d.RequestID == "" || d.Status != "pending" {
		w.t.Fatalf("confirm_action %s answered %s (%v), want a pending request", tool, data, err)
	}
	id, err := w.bot.Items().OfRequest(context.Background(), d.RequestID)
	if err != nil {
		w.t.Fatal(err)
	}
	return id
}

// restart is a mutating request of the agent's; destructive a destructive
// one.
func (w *world) restart() uint64 {
	return w.request(w.agent, "restart_service", map[string]any{"service": "payments"})
}

// ask has the agent ask a question with options through ask_user and
// returns its item.
func (w *world) ask(question string, multi bool, options ...string) uint64 {
	w.t.Helper()
	raw, err := json.Marshal(map[string]any{"question": question, "options": options, "multi": multi})
	if err != nil {
		w.t.Fatal(err)
	}
	res, err := w.bot.Call(context.Background(), w.agent, "ask_user", raw)
	if err != nil {
		w.t.Fatalf("ask_user: %v, want a question asked", err)
	}
	data, _ := json.Marshal(res.Data)
	var d struct {
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(data, &d); err != nil || d.RequestID == "" {
		w.t.Fatalf("ask_user answered %s (%v), want a request_id", data, err)
	}
	id, err := w.bot.Items().OfRequest(context.Background(), d.RequestID)
	if err != nil {
		w.t.Fatal(err)
	}
	w.requests[id] = d.RequestID
	return id
}

// answers are the answers the agent reads for question id
// (action_status).
func (w *world) answers(id uint64) []string {
	w.t.Helper()
	raw, _ := json.Marshal(map[string]any{"request_id": w.requests[id]})
	res, err := w.bot.Call(context.Background(), w.agent, "action_status", raw)
	if err != nil {
		w.t.Fatalf("action_status: %v, want the question's status", err)
	}
	data, _ := json.Marshal(res.Data)
	var d struct {
		Answers []string `json:"answers"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		w.t.Fatalf("action_status answered %s (%v), want JSON with answers", data, err)
	}
	return d.Answers
}

// sensitive is a request of a sensitive tool: its arguments are shown
// only to those who may decide it.
func (w *world) sensitive() uint64 {
	return w.request(w.agent, "record_diagnosis", map[string]any{"diagnosis": "HIV positive"})
}

// quorum is a request two approvers must approve.
func (w *world) quorum() uint64 {
	return w.request(w.agent, "scale_service", map[string]any{"service": "payments"})
}

func (w *world) destructive() uint64 {
	return w.request(w.agent, "delete_database", map[string]any{"db_name": "orders_prod"})
}

// item returns item id as the bot sees it.
func (w *world) item(id uint64) bot.Item {
	w.t.Helper()
	it, err := w.bot.Items().Get(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return it
}

// audit returns the audit chain, oldest first.
func (w *world) audit() []approvals.Entry {
	w.t.Helper()
	var out []approvals.Entry
	err := w.bot.View(context.Background(), func(tx kv.Tx) error {
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
		w.t.Fatal(err)
	}
	return out
}

// entries returns the audit entries of action.
func (w *world) entries(action string) []approvals.Entry {
	var out []approvals.Entry
	for _, en := range w.audit() {
		if en.Action == action {
			out = append(out, en)
		}
	}
	return out
}

// emit queues an outbox event of typ (a reminder, an escalation) with
// note for item id, as the sweeper does.
func (w *world) emit(id uint64, typ, note string) {
	w.t.Helper()
	if err := w.bot.Update(context.Background(), w.bot.SystemCall(w.clock.Now()), func(tx *bot.Tx) error {
		return tx.Emit(id, typ, note)
	}); err != nil {
		w.t.Fatal(err)
	}
}

// deliver delivers one event through renderer as the outbox worker does
// and returns its failure, classified and not yet acted on.
func (w *world) deliver(sink string, r bot.Renderer, ev bot.Event) error {
	return w.bot.Outbox().DeliverTo(sink, r)(context.Background(), ev)
}

// depth is how many events wait in sink's outbox.
func (w *world) depth(sink string) int {
	w.t.Helper()
	n, err := w.bot.Outbox().Depth(context.Background(), sink)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// sweep runs the sweeper as the server's ticker does.
func (w *world) sweep() {
	w.t.Helper()
	if _, err := w.bot.Sweep(context.Background(), w.clock.Now()); err != nil {
		w.t.Fatal(err)
	}
}

// wait polls cond until it holds or 10 s pass: it waits for an
// asynchronous effect and never asserts how fast it came.
func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s, want %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// has reports whether s contains every one of parts.
func has(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
