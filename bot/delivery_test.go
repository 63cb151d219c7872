package bot

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/internal/logtest"
	"github.com/countersign/countersign/kv"
)

// The delivery contract (DeliverTo, Drain), once, on a fake renderer: the
// Slack and Discord tests then only show that their renderers draw and
// classify; what an event means and when it is retried or given up is
// decided here, for every surface.

// fakeRenderer records the calls the outbox makes and answers each with
// the next error queued for it (none: success).
type fakeRenderer struct {
	channels map[string]string
	calls    []string
	fail     map[string][]error // "post", "update", "reply": the next answers
	refuse   map[string]error   // message id: every update of and reply to that card
	posted   int
}

func newFakeRenderer() *fakeRenderer {
	return &fakeRenderer{
		channels: map[string]string{"default": "C-default", "ops": "C-ops", "oncall": "C-oncall"},
		fail:     map[string][]error{},
		refuse:   map[string]error{},
	}
}

func (f *fakeRenderer) next(op string) error {
	q := f.fail[op]
	if len(q) == 0 {
		return nil
	}
	f.fail[op] = q[1:]
	return q[0]
}

func (f *fakeRenderer) Channel(name string) string { return f.channels[name] }

func (f *fakeRenderer) Post(_ context.Context, channel string, it Item, key string) (MessageRef, error) {
	f.calls = append(f.calls, fmt.Sprintf("post %s key=%s", channel, key))
	if err := f.next("post"); err != nil {
		return MessageRef{}, err
	}
	f.posted++
	return MessageRef{ChannelID: channel, MessageID: fmt.Sprintf("m%d", f.posted)}, nil
}

func (f *fakeRenderer) Update(_ context.Context, card MessageRef, it Item) error {
	f.calls = append(f.calls, fmt.Sprintf("update %s/%s %s", card.ChannelID, card.MessageID, it.Status))
	if err := f.refuse[card.MessageID]; err != nil {
		return err
	}
	return f.next("update")
}

func (f *fakeRenderer) Reply(_ context.Context, card MessageRef, it Item, n Note) error {
	f.calls = append(f.calls, fmt.Sprintf("reply %s/%s %s role=%q text=%q key=%s", card.ChannelID, card.MessageID, n.Type, n.Role, n.Text, n.Key))
	if err := f.refuse[card.MessageID]; err != nil {
		return err
	}
	return f.next("reply")
}

// brokenSource renders the items in status, and fails to render any other;
// down[key] > 0 makes the next views of key fail as if the store could not
// be reached.
type brokenSource struct {
	status map[string]string
	down   map[string]int
}

func (s brokenSource) View(_ kv.Tx, rec ItemRecord) (Item, error) {
	if s.down[rec.Key] > 0 {
		s.down[rec.Key]--
		return Item{}, fmt.Errorf("reading %q: %w", rec.Key, kv.ErrUnavailable)
	}
	st, ok := s.status[rec.Key]
	if !ok {
		return Item{}, fmt.Errorf("no request %q", rec.Key)
	}
	return Item{Title: "item " + rec.Key, Status: st}, nil
}

func (brokenSource) DecisionCall(ItemRecord, bool, string, []string) (string, map[string]any, error) {
	return "", nil, errors.New("not decidable in this test")
}

// deliveryEnv is a bot on a bbolt file with a clock the test moves, a log
// it reads, and the "chat" sink.
type deliveryEnv struct {
	t   *testing.T
	b   *Bot
	now time.Time
	src brokenSource
	log *logtest.Buffer
}

func newDeliveryEnv(t *testing.T) *deliveryEnv {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "d.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	e := &deliveryEnv{t: t, now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), src: brokenSource{status: map[string]string{}, down: map[string]int{}}, log: &logtest.Buffer{}}
	e.b, err = New(Options{Store: db, SigningKey: key, Sinks: []string{"chat"}, Now: func() time.Time { return e.now },
		Logger: slog.New(slog.NewTextHandler(e.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.b.Items().RegisterKind(KindAction, e.src)
	return e
}

// item creates a pending item (its created event queued) in channel.
func (e *deliveryEnv) item(key, channel string) uint64 {
	e.t.Helper()
	e.src.status[key] = "pending"
	var id uint64
	err := e.b.Update(context.Background(), e.b.SystemCall(e.now), func(tx *Tx) error {
		var err error
		id, err = tx.NewItem(KindAction, key, Space{UserID: "u"}, channel, e.now.Add(time.Hour))
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *deliveryEnv) emit(id uint64, typ, note string) {
	e.t.Helper()
	if err := e.b.Update(context.Background(), e.b.SystemCall(e.now), func(tx *Tx) error { return tx.Emit(id, typ, note) }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *deliveryEnv) drain(r Renderer) {
	e.t.Helper()
	if err := e.b.Outbox().Drain(context.Background(), "chat", e.b.Outbox().DeliverTo("chat", r)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *deliveryEnv) queued() []Event {
	e.t.Helper()
	evs, err := e.b.Outbox().Due(context.Background(), "chat", e.now.Add(24*time.Hour), 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// TestDeliveryMapsEachEventToItsOperation: each kind of event is one
// operation on the item's cards on the surface (and only on that
// surface's), whatever the renderer.
func TestDeliveryMapsEachEventToItsOperation(t *testing.T) {
	other := MessageRef{Platform: "elsewhere", ChannelID: "X", MessageID: "x1"}
	opsCard := MessageRef{Platform: "chat", ChannelID: "C-ops", MessageID: "m0"}
	oncallCard := MessageRef{Platform: "chat", ChannelID: "C-oncall", MessageID: "m9"}
	cases := []struct {
		name    string
		channel string // the item's
		status  string
		cards   []MessageRef // the item's messages before the event
		typ     string
		note    string
		want    []string
		refs    []MessageRef // the item's chat cards after it; nil: unchanged
	}{
		{name: "created: post in the item's channel", channel: "ops", status: "pending", cards: []MessageRef{other}, typ: EventCreated,
			want: []string{"post C-ops key=post"}, refs: []MessageRef{{Platform: "chat", ChannelID: "C-ops", MessageID: "m1"}}},
		{name: "created in a channel the surface lacks: default", channel: "billing", status: "pending", typ: EventCreated,
			want: []string{"post C-default key=post"}, refs: []MessageRef{{Platform: "chat", ChannelID: "C-default", MessageID: "m1"}}},
		{name: "created again: never a second card", channel: "ops", status: "pending", cards: []MessageRef{opsCard}, typ: EventCreated},
		{name: "updated: every card, not another surface's", channel: "ops", status: "pending", cards: []MessageRef{opsCard, other, oncallCard}, typ: EventUpdated,
			want: []string{"update C-ops/m0 pending", "update C-oncall/m9 pending"}},
		{name: "decided: every card shows the outcome", channel: "ops", status: "approved", cards: []MessageRef{opsCard, oncallCard}, typ: EventDecided,
			want: []string{"update C-ops/m0 approved", "update C-oncall/m9 approved"}},
		{name: "decided, never posted: nothing to update", channel: "ops", status: "approved", cards: []MessageRef{other}, typ: EventDecided},
		{name: "reminder: in every card's thread", channel: "ops", status: "pending", cards: []MessageRef{opsCard, oncallCard}, typ: EventReminder, note: "waited 10m",
			want: []string{`reply C-ops/m0 reminder role="" text="waited 10m" key=reminder7/m0`, `reply C-oncall/m9 reminder role="" text="waited 10m" key=reminder7/m9`}},
		{name: "reminder of an item decided meanwhile: nothing", channel: "ops", status: "rejected", cards: []MessageRef{opsCard}, typ: EventReminder, note: "waited 10m"},
		{name: "escalated: reply, then the card in the escalation channel", channel: "ops", status: "pending", cards: []MessageRef{opsCard}, typ: EventEscalated, note: "channel=oncall role=admin after 20m",
			want: []string{`reply C-ops/m0 escalated role="admin" text="after 20m" key=escalated7/m0`, "post C-oncall key=escalate7"},
			refs: []MessageRef{opsCard, {Platform: "chat", ChannelID: "C-oncall", MessageID: "m1"}}},
		{name: "escalated to a channel that has the card: reply only", channel: "ops", status: "pending", cards: []MessageRef{opsCard, oncallCard}, typ: EventEscalated, note: "channel=oncall",
			want: []string{`reply C-ops/m0 escalated role="" text="" key=escalated7/m0`, `reply C-oncall/m9 escalated role="" text="" key=escalated7/m9`}},
		{name: "escalated to a channel the surface lacks: reply only", channel: "ops", status: "pending", cards: []MessageRef{opsCard}, typ: EventEscalated, note: "channel=pager role=admin",
			want: []string{`reply C-ops/m0 escalated role="admin" text="" key=escalated7/m0`}},
		{name: "escalated, decided meanwhile: nothing", channel: "ops", status: "approved", cards: []MessageRef{opsCard}, typ: EventEscalated, note: "channel=oncall"},
		{name: "post: the card in a stage's channel too", channel: "ops", status: "pending", cards: []MessageRef{opsCard}, typ: EventPost, note: "oncall",
			want: []string{"post C-oncall key=post7"}, refs: []MessageRef{opsCard, {Platform: "chat", ChannelID: "C-oncall", MessageID: "m1"}}},
		{name: "post to a channel that has the card: nothing", channel: "ops", status: "pending", cards: []MessageRef{opsCard, oncallCard}, typ: EventPost, note: "oncall"},
		{name: "post to a channel the surface lacks: nothing", channel: "ops", status: "pending", cards: []MessageRef{opsCard}, typ: EventPost, note: "pharmacy"},
		{name: "post, decided meanwhile: nothing", channel: "ops", status: "approved", cards: []MessageRef{opsCard}, typ: EventPost, note: "oncall"},
		{name: "note: in every card's thread, whatever the state", channel: "ops", status: "approved", cards: []MessageRef{opsCard}, typ: EventNote, note: "approved under grant #3",
			want: []string{`reply C-ops/m0 note role="" text="approved under grant #3" key=note7/m0`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newDeliveryEnv(t)
			ctx := context.Background()
			id := e.item("a", c.channel)
			for _, m := range c.cards {
				if err := e.b.Items().AddMessageRef(ctx, id, m); err != nil {
					t.Fatal(err)
				}
			}
			e.src.status["a"] = c.status
			r := newFakeRenderer()
			if err := e.b.Outbox().DeliverTo("chat", r)(ctx, Event{Seq: 7, Sink: "chat", Type: c.typ, ItemID: id, Note: c.note}); err != nil {
				t.Fatalf("deliver: %v", err)
			}
			if !slices.Equal(r.calls, c.want) {
				t.Errorf("renderer calls:\n got %q\nwant %q", r.calls, c.want)
			}
			it, err := e.b.Items().Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var got []MessageRef
			for _, m := range it.Messages {
				if m.Platform == "chat" {
					got = append(got, m)
				}
			}
			want := c.refs
			if want == nil {
				for _, m := range c.cards {
					if m.Platform == "chat" {
						want = append(want, m)
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("the item's cards: got %+v, want %+v", got, want)
			}
		})
	}
}

// TestDeliveryPostWaitsForTheFirstCard: a post to a stage's channel of an
// item whose first card is not posted yet fails for now (a fault of its
// own, retried; not permanent), posting nothing, so that the created
// event, retried after it, still posts the first card.
func TestDeliveryPostWaitsForTheFirstCard(t *testing.T) {
	e := newDeliveryEnv(t)
	id := e.item("a", "ops")
	r := newFakeRenderer()
	err := e.b.Outbox().DeliverTo("chat", r)(context.Background(), Event{Seq: 8, Sink: "chat", Type: EventPost, ItemID: id, Note: "oncall"})
	var perm *PermanentError
	if err == nil || errors.As(err, &perm) || len(r.calls) != 0 {
		t.Fatalf("post before the first card: err %v, calls %q; want a retryable error and no call", err, r.calls)
	}
	if err := e.b.Outbox().DeliverTo("chat", r)(context.Background(), Event{Seq: 9, Sink: "chat", Type: EventCreated, ItemID: id}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Outbox().DeliverTo("chat", r)(context.Background(), Event{Seq: 8, Sink: "chat", Type: EventPost, ItemID: id, Note: "oncall"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"post C-ops key=post", "post C-oncall key=post8"}; !slices.Equal(r.calls, want) {
		t.Fatalf("calls %q, want %q", r.calls, want)
	}
}

// TestDrainHonoursRetryAfter: a throttled delivery waits for the
// platform's Retry-After when it is longer than the backoff, and never
// counts towards giving up.
func TestDrainHonoursRetryAfter(t *testing.T) {
	e := newDeliveryEnv(t)
	e.item("a", "ops")
	r := newFakeRenderer()
	for range GiveUpAfter + 1 {
		r.fail["post"] = append(r.fail["post"], &RetryAfterError{After: 90 * time.Second, Err: errors.New("429")})
	}
	start := e.now
	e.drain(r)
	q := e.queued()
	if len(q) != 1 || !q[0].NextAttempt.Equal(start.Add(90*time.Second)) || q[0].Attempts != 1 || q[0].Faults != 0 {
		t.Fatalf("after a 429 of 90s: %+v, want next attempt at +90s, 1 attempt, no fault", q)
	}
	e.now = start.Add(89 * time.Second)
	e.drain(r)
	if n := len(r.calls); n != 1 {
		t.Fatalf("%d posts, want 1: retried before its Retry-After", n)
	}
	for range GiveUpAfter + 1 {
		e.now = e.now.Add(2 * time.Minute)
		e.drain(r)
	}
	if g, _ := e.b.Outbox().GivenUp(context.Background(), "chat", 10); len(g) != 0 || len(e.queued()) != 0 || len(r.calls) != GiveUpAfter+2 {
		t.Fatalf("after %d throttled attempts: given up %+v, queued %+v, %d posts; want it delivered at the next", GiveUpAfter+1, g, e.queued(), len(r.calls))
	}
}

// TestDrainRetriesAnUnavailablePlatformWithBackoffNeverGivingUp: a
// platform that is down holds the event (and the later ones) with
// backoff for as long as it takes.
func TestDrainRetriesAnUnavailablePlatformWithBackoffNeverGivingUp(t *testing.T) {
	e := newDeliveryEnv(t)
	e.item("a", "ops")
	e.item("b", "ops")
	r := newFakeRenderer()
	const down = 3 * GiveUpAfter
	for range down {
		r.fail["post"] = append(r.fail["post"], &UnavailableError{Err: errors.New("503")})
	}
	for n := 1; n <= down; n++ {
		at := e.now
		e.drain(r)
		q := e.queued()
		if len(q) != 2 || q[0].Attempts != n || q[0].Faults != 0 || !q[0].NextAttempt.Equal(at.Add(Backoff(n))) {
			t.Fatalf("attempt %d: queue %+v; want both events kept, the first due after Backoff(%d) = %v", n, q, n, Backoff(n))
		}
		e.now = q[0].NextAttempt
	}
	if n := len(r.calls); n != down {
		t.Fatalf("%d posts while down, want %d: the later event waits its turn", n, down)
	}
	e.drain(r)
	if q := e.queued(); len(q) != 0 {
		t.Fatalf("after the platform is back: %+v queued, want none", q)
	}
	if st, _ := e.b.Outbox().Stats(context.Background()); st["chat"].GivenUp != 0 {
		t.Fatalf("stats %+v, want GivenUp 0: nothing is given up while the platform is down", st["chat"])
	}
}

// TestDrainNeverGivesUpWhileTheStoreIsUnavailable: an item that cannot be
// read because the store cannot be reached is not the event's fault.
func TestDrainNeverGivesUpWhileTheStoreIsUnavailable(t *testing.T) {
	e := newDeliveryEnv(t)
	e.item("a", "ops")
	e.src.down["a"] = 2 * GiveUpAfter
	r := newFakeRenderer()
	for n := 1; n <= 2*GiveUpAfter; n++ {
		e.drain(r)
		q := e.queued()
		if len(q) != 1 || q[0].Attempts != n || q[0].Faults != 0 {
			t.Fatalf("store down, attempt %d: queue %+v; want the event kept with no fault", n, q)
		}
		e.now = q[0].NextAttempt
	}
	e.drain(r)
	if q := e.queued(); len(q) != 0 || !slices.Equal(r.calls, []string{"post C-ops key=post"}) {
		t.Fatalf("store back: queue %+v, calls %q; want the item posted", q, r.calls)
	}
}

// TestDrainGivesUpAfterNFaults: an event that fails for a reason of its
// own (here its item cannot be rendered) is tried GiveUpAfter times, then
// given up: recorded, counted, logged as an error, and the later events of
// the sink go out.
func TestDrainGivesUpAfterNFaults(t *testing.T) {
	e := newDeliveryEnv(t)
	bad := e.item("broken", "ops")
	delete(e.src.status, "broken") // its source can no longer render it
	e.item("fine", "ops")
	r := newFakeRenderer()
	for n := 1; n < GiveUpAfter; n++ {
		e.drain(r)
		q := e.queued()
		if len(q) != 2 || q[0].ItemID != bad || q[0].Faults != n {
			t.Fatalf("fault %d: queue %+v; want the broken item's event kept, ahead of the other", n, q)
		}
		if len(r.calls) != 0 {
			t.Fatalf("fault %d: posts %q, want none: the later event must wait its turn", n, r.calls)
		}
		e.now = q[0].NextAttempt
	}
	e.drain(r)
	if q := e.queued(); len(q) != 0 {
		t.Fatalf("after %d faults: %+v still queued, want none", GiveUpAfter, q)
	}
	if !slices.Equal(r.calls, []string{"post C-ops key=post"}) {
		t.Fatalf("renderer calls %q, want the other item posted in the same pass", r.calls)
	}
	g, err := e.b.Outbox().GivenUp(context.Background(), "chat", 10)
	if err != nil || len(g) != 1 || g[0].ItemID != bad || g[0].Attempts != GiveUpAfter || !strings.Contains(g[0].Reason, `no request "broken"`) || !g[0].At.Equal(e.now) {
		t.Fatalf("given up %+v, %v; want the broken item's event after %d attempts, with why", g, err, GiveUpAfter)
	}
	st, _ := e.b.Outbox().Stats(context.Background())
	if st["chat"] != (OutboxStat{GivenUp: 1}) {
		t.Fatalf("stats %+v, want one given up and nothing queued", st["chat"])
	}
	if l := e.log.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, `msg="outbox delivery given up"`) || !strings.Contains(l, fmt.Sprintf("item=%d", bad)) {
		t.Fatalf("log does not say the event was given up:\n%s", l)
	}
}

// TestDrainGivesUpAPermanentFailureAtOnce: the platform refusing for good,
// an item that is gone and an unknown event type are given up at the
// first attempt, recorded, and a decision notification among them says so
// in the log.
func TestDrainGivesUpAPermanentFailureAtOnce(t *testing.T) {
	e := newDeliveryEnv(t)
	ctx := context.Background()
	a := e.item("a", "ops")
	r := newFakeRenderer()
	e.drain(r) // posted: m1
	e.src.status["a"] = "approved"
	e.emit(a, EventDecided, "")
	r.fail["update"] = []error{&PermanentError{Err: errors.New("message_not_found")}}
	if err := e.b.Update(ctx, e.b.SystemCall(e.now), func(tx *Tx) error {
		if err := tx.EmitTo("chat", 999, EventUpdated, ""); err != nil {
			return err
		}
		return tx.EmitTo("chat", a, "shout", "")
	}); err != nil {
		t.Fatal(err)
	}
	e.item("b", "ops")
	e.drain(r)
	if q := e.queued(); len(q) != 0 {
		t.Fatalf("queued %+v, want every permanent failure given up and the rest delivered", q)
	}
	g, err := e.b.Outbox().GivenUp(ctx, "chat", 10)
	if err != nil || len(g) != 3 {
		t.Fatalf("given up %+v, %v; want 3", g, err)
	}
	for i, want := range []string{"unknown event type", "no such item", "message_not_found"} { // newest first
		if g[i].Attempts != 1 || !strings.Contains(g[i].Reason, want) {
			t.Errorf("given up [%d] = %+v, want 1 attempt and %q", i, g[i], want)
		}
	}
	if !slices.Contains(r.calls, "post C-ops key=post") || len(r.calls) != 3 {
		t.Errorf("renderer calls %q, want the first post, the refused update and the second post", r.calls)
	}
	if l := e.log.String(); !strings.Contains(l, "does not show the item's outcome") {
		t.Errorf("a decision notification given up is not called one in the log:\n%s", l)
	}
	if st, _ := e.b.Outbox().Stats(ctx); st["chat"].GivenUp != 3 {
		t.Errorf("stats %+v, want 3 given up", st["chat"])
	}
}

// TestDeliverySkipsARefusedCard: a card the platform refuses for good is
// skipped and the others served; only when every card refuses is the
// event a permanent failure. Any other failure stops the event at once.
func TestDeliverySkipsARefusedCard(t *testing.T) {
	e := newDeliveryEnv(t)
	ctx := context.Background()
	id := e.item("a", "ops")
	for _, m := range []string{"m1", "m2"} {
		if err := e.b.Items().AddMessageRef(ctx, id, MessageRef{Platform: "chat", ChannelID: "C-ops", MessageID: m}); err != nil {
			t.Fatal(err)
		}
	}
	deliver := func(r Renderer, typ, note string) error {
		return e.b.Outbox().DeliverTo("chat", r)(ctx, Event{Seq: 3, Sink: "chat", Type: typ, ItemID: id, Note: note})
	}
	gone := &PermanentError{Err: errors.New("message_not_found")}
	for _, typ := range []string{EventUpdated, EventReminder, EventNote} {
		r := newFakeRenderer()
		r.refuse["m1"] = gone
		if err := deliver(r, typ, ""); err != nil || len(r.calls) != 2 {
			t.Errorf("%s with one card refused: %v after %q; want both tried and the event delivered", typ, err, r.calls)
		}
		r = newFakeRenderer()
		r.refuse["m1"], r.refuse["m2"] = gone, gone
		var perm *PermanentError
		if err := deliver(r, typ, ""); !errors.As(err, &perm) {
			t.Errorf("%s with every card refused: %v, want a permanent failure", typ, err)
		}
		r = newFakeRenderer()
		r.fail["update"] = []error{&UnavailableError{Err: errors.New("503")}}
		r.fail["reply"] = r.fail["update"]
		var unav *UnavailableError
		if err := deliver(r, typ, ""); !errors.As(err, &unav) || len(r.calls) != 1 {
			t.Errorf("%s meeting a 503: %v after %q; want it returned at once", typ, err, r.calls)
		}
	}
	// An escalation whose replies are all refused still posts the card in
	// the escalation channel, and is then delivered.
	r := newFakeRenderer()
	r.refuse["m1"], r.refuse["m2"] = gone, gone
	if err := deliver(r, EventEscalated, "channel=oncall"); err != nil || r.calls[len(r.calls)-1] != "post C-oncall key=escalate3" {
		t.Errorf("escalation with its replies refused: %v after %q; want the card posted in oncall", err, r.calls)
	}
	// A post without a message id cannot be kept up to date: a fault.
	r = newFakeRenderer()
	e2 := newDeliveryEnv(t)
	id2 := e2.item("b", "ops")
	err := e2.b.Outbox().DeliverTo("chat", noID{r})(ctx, Event{Seq: 1, Sink: "chat", Type: EventCreated, ItemID: id2})
	var perm *PermanentError
	if err == nil || errors.As(err, &perm) || !strings.Contains(err.Error(), "without a message id") {
		t.Errorf("a post answered without an id: %v, want a fault saying so", err)
	}
}

// noID is a renderer whose posts come back without a message id.
type noID struct{ *fakeRenderer }

func (n noID) Post(ctx context.Context, channel string, it Item, key string) (MessageRef, error) {
	ref, err := n.fakeRenderer.Post(ctx, channel, it, key)
	ref.MessageID = ""
	return ref, err
}
