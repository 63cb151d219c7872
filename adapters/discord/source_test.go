package discord

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/adapters/discord/discordtest"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/internal/logtest"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// testState is the whole state of a test item. testSource stands in for
// the memory and approvals packages, so these tests depend on no other
// helper's work: it renders items and decides them through a registered
// tool, with the same rules (requester is not the approver, one decision
// once, quorum) the real sources apply.
type testState struct {
	Title         string      `json:"title"`
	Fields        []bot.Field `json:"fields"`
	RequesterName string      `json:"requester_name"`
	RequesterID   string      `json:"requester_id"`
	ExpiresAt     time.Time   `json:"expires_at"`
	Sensitive     bool        `json:"sensitive"`
	Options       []string    `json:"options"`
	Multi         bool        `json:"multi"`
	Quorum        int         `json:"quorum"`

	Status    string    `json:"status"`
	Approvals []string  `json:"approvals"`
	DecidedBy []string  `json:"decided_by"`
	DecidedAt time.Time `json:"decided_at"`
	Reason    string    `json:"reason"`
	Answers   []string  `json:"answers"`
	Applied   int       `json:"applied"` // decisions applied: must never exceed one

	// Edits: Arguments (an action's) or Value (a memory change's) may be
	// edited while pending; Proposed* keep what was proposed.
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	Value         string          `json:"value,omitempty"`
	ProposedArgs  json.RawMessage `json:"proposed_args,omitempty"`
	ProposedValue string          `json:"proposed_value,omitempty"`
	EditedBy      string          `json:"edited_by,omitempty"`
}

const testBucket = "test_items"

type testSource struct{}

func loadState(tx kv.Tx, key string) (testState, error) {
	var st testState
	b, err := tx.Get(testBucket, []byte(key))
	if err != nil || b == nil {
		return st, fmt.Errorf("test item %q: %v", key, err)
	}
	return st, json.Unmarshal(b, &st)
}

func saveState(tx kv.Tx, key string, st testState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return tx.Put(testBucket, []byte(key), b)
}

func (testSource) View(tx kv.Tx, rec bot.ItemRecord) (bot.Item, error) {
	st, err := loadState(tx, rec.Key)
	if err != nil {
		return bot.Item{}, err
	}
	it := bot.Item{
		Title: st.Title, Fields: st.Fields, Requester: fmt.Sprintf("%s [%s]", st.RequesterName, st.RequesterID),
		ExpiresAt: st.ExpiresAt, Status: st.Status, DecidedBy: st.DecidedBy, DecidedAt: st.DecidedAt,
		Reason: st.Reason, Sensitive: st.Sensitive, Options: st.Options, Multi: st.Multi,
	}
	if st.Status == "pending" {
		switch {
		case st.Arguments != nil:
			it.Editable = &bot.Editable{Kind: bot.EditArguments, Current: st.Arguments}
		case st.Value != "":
			cur, _ := json.Marshal(st.Value)
			it.Editable = &bot.Editable{Kind: bot.EditValue, Current: cur}
		}
	}
	if st.EditedBy != "" {
		c := &bot.Changes{By: st.EditedBy}
		if st.ProposedArgs != nil {
			c.Diff, c.More = bot.DiffArgs(st.ProposedArgs, st.Arguments)
		} else {
			c.Diff = []bot.Change{{Field: "value", From: bot.ShowValue(st.ProposedValue), To: bot.ShowValue(st.Value)}}
		}
		it.Changes = c
	}
	if st.Quorum > 1 && len(st.Approvals) > 0 {
		it.Tally = fmt.Sprintf("%d of %d approvals: %s", len(st.Approvals), st.Quorum, strings.Join(st.Approvals, ", "))
	}
	return it, nil
}

func (testSource) DecisionCall(rec bot.ItemRecord, approve bool, reason string, answers []string) (string, map[string]any, error) {
	args := map[string]any{"item": rec.ID, "approve": approve}
	if reason != "" {
		args["reason"] = reason
	}
	if answers != nil {
		args["answers"] = answers
	}
	return "test_decide", args, nil
}

// EditCall maps an approval with an edit to test_decide with arguments
// or value, as the real sources map it to approve_action/confirm_change.
func (testSource) EditCall(rec bot.ItemRecord, edit json.RawMessage, reason string) (string, map[string]any, error) {
	args := map[string]any{"item": rec.ID, "approve": true}
	if reason != "" {
		args["reason"] = reason
	}
	var v string
	if json.Unmarshal(edit, &v) == nil {
		args["value"] = v
	} else {
		args["arguments"] = edit
	}
	return "test_decide", args, nil
}

type decideArgs struct {
	Item      uint64         `json:"item"`
	Approve   bool           `json:"approve"`
	Reason    string         `json:"reason,omitempty"`
	Answers   []string       `json:"answers,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Value     *string        `json:"value,omitempty"`
}

func testDecide(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	a := args.(*decideArgs)
	var rec *bot.ItemRecord
	var st testState
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		if rec, err = bot.LoadItemRecord(tx, a.Item); err != nil || rec == nil {
			return fmt.Errorf("no item %d: %v", a.Item, err)
		}
		st, err = loadState(tx, rec.Key)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	if a.Arguments != nil {
		if n, ok := a.Arguments["db_name"].(string); !ok || n == "" || strings.ToLower(n) != n || strings.ContainsAny(n, "!- ") {
			return bot.Result{}, bot.Invalid("arguments.db_name", "must be lowercase letters and underscores, such as orders_staging")
		}
	}
	if policy.SamePrincipal(st.RequesterID, st.RequesterName, c.Caller.ID, c.Caller.Name) {
		return bot.Result{}, c.Deny(ctx, fmt.Sprintf("Access denied: you requested #%d, so someone else must decide it.", a.Item))
	}
	err = c.Update(ctx, func(tx *bot.Tx) error {
		st, err := loadState(tx, rec.Key)
		if err != nil {
			return err
		}
		if st.Status != "pending" {
			return bot.Errorf(bot.KindConflict, "#%d is not awaiting approval.", a.Item)
		}
		who := c.Caller.String()
		if a.Approve && slices.Contains(st.Approvals, who) {
			return bot.Errorf(bot.KindConflict, "You already approved #%d.", a.Item)
		}
		if a.Arguments != nil {
			edited, err := json.Marshal(a.Arguments)
			if err != nil {
				return err
			}
			if st.ProposedArgs == nil {
				st.ProposedArgs = st.Arguments
			}
			st.Arguments, st.EditedBy = edited, who
		}
		if a.Value != nil {
			if st.ProposedValue == "" {
				st.ProposedValue = st.Value
			}
			st.Value, st.EditedBy = *a.Value, who
		}
		event := bot.EventDecided
		switch {
		case !a.Approve:
			st.Status, st.Reason, st.DecidedBy = "rejected", a.Reason, []string{who}
		case len(st.Answers) == 0 && a.Answers != nil:
			st.Status, st.Answers, st.DecidedBy = "answered", a.Answers, []string{who}
		default:
			st.Approvals = append(st.Approvals, who)
			if len(st.Approvals) < max(st.Quorum, 1) {
				event = bot.EventUpdated
			} else {
				st.Status, st.DecidedBy = "approved", st.Approvals
			}
		}
		if event == bot.EventDecided {
			st.DecidedAt = c.Now
			st.Applied++
		}
		if err := saveState(tx, rec.Key, st); err != nil {
			return err
		}
		if err := tx.Audit("test_decide", fmt.Sprintf("#%d approve=%v answers=%v", a.Item, a.Approve, a.Answers)); err != nil {
			return err
		}
		return tx.Emit(a.Item, event, "")
	})
	if err != nil {
		return bot.Result{}, err
	}
	return bot.Result{Text: "ok"}, nil
}

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// Chat identities of the tests.
const (
	guild      = "G1"
	chDefault  = "C100"
	chOps      = "C200"
	uSmith     = "111" // mapped by user id to dr_smith (member)
	uOncall    = "222" // mapped by role rOncall to oncall (member)
	rOncall    = "555"
	uViewer    = "333" // mapped to vic (viewer: no approve)
	uStranger  = "999" // not mapped
	botToken   = "test-token"
	testAppID  = "APP"
	requesterA = "agent_x"
)

var (
	smith    = discordtest.Clicker{UserID: uSmith, GuildID: guild}
	oncall   = discordtest.Clicker{UserID: uOncall, Roles: []string{"42", rOncall}, GuildID: guild}
	stranger = discordtest.Clicker{UserID: uStranger, Roles: []string{"42"}, GuildID: guild}
)

// env is a bot over a real bbolt file with the test source, a fake
// Discord, and the adapter under test.
type env struct {
	t     *testing.T
	path  string
	key   ed25519.PrivateKey
	pub   ed25519.PublicKey
	clock *bottest.Clock
	fake  *discordtest.Server
	db    *bolt.DB
	bot   *bot.Bot
	a     *Adapter
	url   string // the HTTP interactions endpoint
	seq   int
	logs  *logtest.Buffer // what the adapter logged
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, path: filepath.Join(t.TempDir(), "cs.db"), key: priv, pub: pub, clock: bottest.NewClock(t0), logs: &logtest.Buffer{}}
	e.fake = discordtest.New(t, botToken)
	e.open()
	return e
}

// open opens the store and builds the bot and the adapter on it (again,
// after close: a restart).
func (e *env) open() {
	t := e.t
	t.Helper()
	db, err := bolt.Open(e.path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := testbot.New(t, bot.Options{Store: db, Now: e.clock.Now, Sinks: []string{Sink}})
	if err := b.Register(bot.Tool{Name: "test_decide", Description: "decide a test item", Capability: policy.CapApprove, Args: decideArgs{}, Handler: testDecide}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []bot.ItemKind{bot.KindMemoryChange, bot.KindAction, bot.KindConsent, bot.KindQuestion} {
		b.Items().RegisterKind(k, testSource{})
	}
	dir, err := bot.NewDirectory([]bot.ChatPrincipal{
		{Name: "dr_smith", Role: policy.RoleMember, Discord: uSmith},
		{Name: "oncall", Role: policy.RoleMember, DiscordRoles: []string{rOncall}},
		{Name: "vic", Role: policy.RoleViewer, Discord: uViewer},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Chat().SetDirectory(dir)
	a, err := New(Options{
		Bot: b, Token: botToken, PublicKey: e.pub, ApplicationID: testAppID, GuildID: guild,
		APIURL: e.fake.APIURL, Channels: map[string]string{"default": chDefault, "ops": chOps},
		Transport: discordtest.Transport(), Dialer: discordtest.Dialer(),
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /discord/interactions", a.Handler())
	srv := httptest.NewServer(mux)
	e.db, e.bot, e.a, e.url = db, b, a, srv.URL+"/discord/interactions"
	t.Cleanup(func() {
		srv.Close()
		db.Close()
	})
}

// newItem creates a pending item (as a system call) and returns its id.
func (e *env) newItem(kind bot.ItemKind, channel string, st testState) uint64 {
	e.t.Helper()
	e.seq++
	key := fmt.Sprintf("k%d", e.seq)
	if st.Status == "" {
		st.Status = "pending"
	}
	if st.RequesterName == "" {
		st.RequesterName, st.RequesterID = requesterA, "prin_agent"
	}
	var id uint64
	err := e.bot.Update(context.Background(), e.bot.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
		if err := saveState(tx, key, st); err != nil {
			return err
		}
		var err error
		id, err = tx.NewItem(kind, key, bot.Space{UserID: "patient_7"}, channel, time.Time{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// close changes a test item's state as the sweeper would, and queues the
// decided event.
func (e *env) closeAs(id uint64, status string) {
	e.t.Helper()
	err := e.bot.Update(context.Background(), e.bot.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
		rec, err := bot.LoadItemRecord(tx, id)
		if err != nil || rec == nil {
			return fmt.Errorf("no item %d", id)
		}
		st, err := loadState(tx, rec.Key)
		if err != nil {
			return err
		}
		st.Status, st.DecidedBy, st.DecidedAt = status, []string{"countersign [sweeper]"}, e.clock.Now()
		if err := saveState(tx, rec.Key, st); err != nil {
			return err
		}
		return tx.Emit(id, bot.EventDecided, "")
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// state reads a test item's state.
func (e *env) state(id uint64) testState {
	e.t.Helper()
	var st testState
	err := e.bot.View(context.Background(), func(tx kv.Tx) error {
		rec, err := bot.LoadItemRecord(tx, id)
		if err != nil || rec == nil {
			return fmt.Errorf("no item %d", id)
		}
		st, err = loadState(tx, rec.Key)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// item reads an item's view.
func (e *env) item(id uint64) bot.Item {
	e.t.Helper()
	it, err := e.bot.Items().Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return it
}

// drain delivers every due outbox event to the fake.
func (e *env) drain() {
	e.t.Helper()
	if err := e.bot.Outbox().Drain(context.Background(), Sink, e.bot.Outbox().DeliverTo(Sink, e.a.Renderer())); err != nil {
		e.t.Fatal(err)
	}
}

// deliver delivers one event to the fake as the outbox worker does, and
// returns its failure (classified, not yet acted on).
func (e *env) deliver(ev bot.Event) error {
	return e.bot.Outbox().DeliverTo(Sink, e.a.Renderer())(context.Background(), ev)
}

// ref is the Discord message posted for an item.
func (e *env) ref(id uint64) bot.MessageRef {
	e.t.Helper()
	rs := refs(e.item(id))
	if len(rs) != 1 {
		e.t.Fatalf("item %d has %d discord messages, want 1", id, len(rs))
	}
	return rs[0]
}

// post signs and posts an interaction to the HTTP endpoint now.
func (e *env) post(payload any) (int, map[string]any) {
	e.t.Helper()
	return discordtest.Post(e.t, e.url, e.key, e.clock.Now(), discordtest.Marshal(e.t, payload))
}

// click posts a signed click on item id's message.
func (e *env) click(iid string, who discordtest.Clicker, id uint64, custom string, values ...string) map[string]any {
	e.t.Helper()
	ref := e.ref(id)
	status, resp := e.post(discordtest.Click(iid, who, ref.ChannelID, ref.MessageID, custom, values...))
	if status != http.StatusOK {
		e.t.Fatalf("click %s: status %d: %v, want 200", custom, status, resp)
	}
	return resp
}

// audit returns the audit chain's entries as "principal|action|detail".
func (e *env) audit() []string {
	e.t.Helper()
	var out []string
	err := e.bot.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend("audit", nil, nil, func(k, v []byte) error {
			en, err := approvals.DecodeRow(k, v)
			if err != nil {
				return err
			}
			out = append(out, en.Principal+"|"+en.Action+"|"+en.Detail)
			return nil
		})
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// auditHas reports whether an audit entry contains every one of parts.
func (e *env) auditHas(parts ...string) bool {
	for _, en := range e.audit() {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(en, p)
		}
		if ok {
			return true
		}
	}
	return false
}
