package memorytools

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// holdStore holds every Update while hold is set, signalling entered.
type holdStore struct {
	kv.Store
	mu      sync.Mutex
	hold    chan struct{}
	entered chan struct{}
}

func (s *holdStore) Update(ctx context.Context, fn func(kv.Tx) error) error {
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-hold
	}
	return s.Store.Update(ctx, fn)
}

// TestReadVerdictsFailClosedOnAuditBacklog: with the audit appender stuck
// and its queue full, check_before_act answers BLOCKED, safe_recall
// WITHHELD (showing no fact), and recall refuses with a 429, each naming the
// backlog; none of the refused reads is recorded, and the verdicts that were
// queued are committed once the appender moves.
func TestReadVerdictsFailClosedOnAuditBacklog(t *testing.T) {
	t.Parallel()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "cs.db"), bolt.Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := &holdStore{Store: db, entered: make(chan struct{}, 1)}
	_, key, _ := ed25519.GenerateKey(nil)
	b, err := bot.New(bot.Options{Store: store, SigningKey: key, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := memory.NewSchema([]memory.Slot{{Name: "allergy", Category: "allergy", Verbatim: true, Multi: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Register(b, memory.Options{Schema: schema, CriticalCategories: []string{"allergy"}}); err != nil {
		t.Fatal(err)
	}
	agent := &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "ward_bot", Role: policy.RoleAgent}, Surface: "test"}
	ctx := context.Background()
	call := func(tool, args string) (bot.Result, error) { return b.Call(ctx, agent, tool, []byte(args)) }
	if _, err := call("remember", `{"subject":"allergy","value":"penicillin","confidence":1}`); err != nil {
		t.Fatal(err)
	}
	q, err := b.StartReadAudit(ctx, bot.ReadAuditOptions{Size: 1, Wait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	store.mu.Lock()
	store.hold = hold
	store.mu.Unlock()
	// The first verdict is taken by the appender (stuck), the second fills
	// the queue: both are answered.
	for i, want := range []string{"✅ SAFE", "✅ SAFE"} {
		r, err := call("check_before_act", `{"subject":"allergy"}`)
		if err != nil || !strings.HasPrefix(r.Text, want) {
			t.Fatalf("verdict %d: %q %v; want it to start with %q", i, r.Text, err, want)
		}
		if i == 0 {
			<-store.entered
		}
	}
	r, err := call("check_before_act", `{"subject":"allergy"}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "⛔ BLOCKED — do NOT act on 'allergy':\n  • " + bot.ReasonAuditBacklog; r.Text != want {
		t.Fatalf("check_before_act = %q, want %q", r.Text, want)
	}
	if d := mustJSON(t, r.Data); !strings.Contains(d, `"verdict":"BLOCKED"`) || !strings.Contains(d, `"facts":[]`) && !strings.Contains(d, `"facts":null`) || strings.Contains(d, "penicillin") {
		t.Fatalf("check_before_act data = %s; want %s, no facts and no %q in it", d, `"verdict":"BLOCKED"`, "penicillin")
	}
	r, err = call("safe_recall", `{"question":"what is she allergic to?"}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "⛔ WITHHELD — not safe to act on this answer:\n  • " + bot.ReasonAuditBacklog; r.Text != want {
		t.Fatalf("safe_recall = %q, want %q", r.Text, want)
	}
	if d := mustJSON(t, r.Data); !strings.Contains(d, `"verdict":"WITHHELD"`) || strings.Contains(d, "penicillin") {
		t.Fatalf("safe_recall data shows what it withheld: %s; want %s and no %q in it", d, `"verdict":"WITHHELD"`, "penicillin")
	}
	_, err = call("recall", `{"question":"what is she allergic to?"}`)
	if bot.KindOf(err) != bot.KindRateLimited || !strings.Contains(err.Error(), "audit backlog") {
		t.Fatalf("recall = %v, want a 429 naming the audit backlog", err)
	}
	store.mu.Lock()
	store.hold = nil
	store.mu.Unlock()
	close(hold)
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var actions []string
	err = db.View(ctx, func(tx kv.Tx) error {
		es, err := approvals.List(tx, approvals.Filter{Limit: 10})
		for i := len(es) - 1; i >= 0; i-- {
			actions = append(actions, es[i].Action+" "+es[i].Detail)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(actions, "\n"); got != "remember ADD allergy #1\ncheck_before_act allergy: SAFE\ncheck_before_act allergy: SAFE" {
		t.Fatalf("chain:\n%s\nwant:\n%s", got, "remember ADD allergy #1\ncheck_before_act allergy: SAFE\ncheck_before_act allergy: SAFE")
	}
	rep, err := approvals.Verify(ctx, db, b.PublicKey())
	if err != nil || !rep.Intact {
		t.Fatalf("verify: %+v %v; want an intact chain", rep, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
