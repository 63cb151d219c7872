package bot

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/kv/kvtest"
	"github.com/countersign/countersign/policy"
)

// typedSource keeps its items' statuses in the store (bucket "typed") and
// decides them with the typed tool "typed_decide": what an ItemDecider's
// tool does, in the call's transactions only.
type typedSource struct{}

type typedArgs struct {
	Key     string `json:"key"`
	Approve bool   `json:"approve"`
	Fail    bool   `json:"fail,omitempty"`
}

func (typedSource) View(tx kv.Tx, rec ItemRecord) (Item, error) {
	v, err := tx.Get("typed", []byte(rec.Key))
	return Item{Title: "item " + rec.Key, Status: string(v)}, err
}

func (typedSource) DecisionCall(ItemRecord, bool, string, []string) (string, map[string]any, error) {
	return "", nil, errors.New("typedSource decides typed only")
}

func (typedSource) DecisionArgs(rec ItemRecord, d Decision) (string, any, error) {
	return "typed_decide", &typedArgs{Key: rec.Key, Approve: d.Approve, Fail: d.Reason == "fail"}, nil
}

// newTypedBot is a bot with typedSource's tool and one pending item,
// whose id it returns. A handler's AfterCommit reads the status committed.
func newTypedBot(t *testing.T, afterCommit *[]string) (*Bot, uint64) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, sk, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// Every write function runs twice (a rolled-back rehearsal, then for
	// real), as an engine may run it: Decide's results and its AfterCommit
	// work come from the run that commits.
	b, err := New(Options{Store: kvtest.Twice(db), SigningKey: sk, Sinks: []string{"slack"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	b.Items().RegisterKind(KindAction, typedSource{})
	err = b.Register(Tool{Name: "typed_decide", Capability: policy.CapApprove, Args: typedArgs{}, Handler: func(ctx context.Context, c *Call, a any) (Result, error) {
		args := a.(*typedArgs)
		var refusal *policy.Refusal
		err := c.Update(ctx, func(tx *Tx) error {
			if refusal = c.Caller.MayDecide(policy.Decidable{Ref: args.Key, Approvers: policy.Approvers{Principals: []string{"alice"}}}); refusal != nil {
				return tx.Refuse(refusal)
			}
			status := "rejected"
			if args.Approve {
				status = "approved"
			}
			if err := tx.Put("typed", []byte(args.Key), []byte(status)); err != nil {
				return err
			}
			if args.Fail {
				return errors.New("the handler's transaction failed")
			}
			return tx.Emit(1, EventDecided, "")
		})
		if err != nil {
			return Result{}, err
		}
		if refusal != nil {
			return Result{}, Refused(refusal)
		}
		c.AfterCommit(func() {
			_ = b.View(ctx, func(tx kv.Tx) error {
				v, err := tx.Get("typed", []byte(args.Key))
				*afterCommit = append(*afterCommit, string(v))
				return err
			})
		})
		return Result{Text: "decided " + args.Key}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var id uint64
	err = b.Update(context.Background(), b.SystemCall(b.Now()), func(tx *Tx) error {
		if err := tx.Put("typed", []byte("k"), []byte("pending")); err != nil {
			return err
		}
		id, err = tx.NewItem(KindAction, "k", Space{UserID: "u"}, "", time.Time{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b, id
}

func decider(name string) *Caller {
	return &Caller{Principal: Principal{ID: "prin_" + name, Name: name, Role: policy.RoleMember, Kind: "person"}, Surface: "slack"}
}

// deniedAudits counts the access_denied entries of the audit chain.
func deniedAudits(t *testing.T, b *Bot) int {
	t.Helper()
	n := 0
	err := b.View(context.Background(), func(tx kv.Tx) error {
		es, err := approvals.List(tx, approvals.Filter{Limit: 1000})
		for _, e := range es {
			if e.Action == "access_denied" {
				n++
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDecideIsOneTransaction: bot.Decide commits a delivery's dedupe with
// the decision or the refusal it ends in, and rolls both back when the
// surface's check or the handler's transaction fails; the item it returns
// is the one the decision left; AfterCommit work sees the commit.
func TestDecideIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	var seen []string
	b, id := newTypedBot(t, &seen)

	// The surface's check says no: its error comes back as it is, and
	// the delivery is not recorded (nothing was applied).
	stop := errors.New("the surface's check said no")
	check := func(it Item, d *Decision) error {
		if it.Status != "pending" {
			t.Errorf("the check saw status %q, want pending", it.Status)
		}
		return stop
	}
	if _, err := b.Decide(ctx, decider("alice"), Decision{ItemID: id, Approve: true, Deliveries: []string{"d1"}, Check: check}); !errors.Is(err, stop) {
		t.Fatalf("a check's refusal: err %v, want %v", err, stop)
	}

	// The handler's transaction fails: nothing commits, not even its put
	// or the delivery's dedupe.
	if _, err := b.Decide(ctx, decider("alice"), Decision{ItemID: id, Approve: true, Reason: "fail", Deliveries: []string{"d1"}}); err == nil || KindOf(err) != KindInternal {
		t.Fatalf("a failed handler: err %v, want an internal error", err)
	}
	if it, _ := b.Items().Get(ctx, id); it.Status != "pending" {
		t.Fatalf("after a failed handler the item is %q, want pending (rolled back)", it.Status)
	}

	// Refused by the one rule: the refusal, typed, and its audit entry
	// commit with the dedupe.
	_, err := b.Decide(ctx, decider("bob"), Decision{ItemID: id, Approve: true, Deliveries: []string{"d2"}})
	var r *policy.Refusal
	if KindOf(err) != KindDenied || !errors.Is(err, policy.CheckApprovers) || !errors.As(err, &r) {
		t.Fatalf("bob's approval: err %v, want a KindDenied refusal by %v", err, policy.CheckApprovers)
	}
	if n := deniedAudits(t, b); n != 1 {
		t.Fatalf("%d refusals audited, want 1", n)
	}
	if _, err := b.Decide(ctx, decider("bob"), Decision{ItemID: id, Approve: true, Deliveries: []string{"d2"}}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the refused delivery again: err %v, want ErrDuplicate (its dedupe committed with the refusal)", err)
	}

	// Decided: the item as the decision left it, the waiter after the
	// commit, and the same delivery again is a duplicate.
	dec, err := b.Decide(ctx, decider("alice"), Decision{ItemID: id, Approve: true, Deliveries: []string{"d1"}})
	if err != nil || dec.Item.Status != "approved" || dec.Result.Text != "decided k" {
		t.Fatalf("alice's approval: %+v %v, want the item approved and the tool's answer", dec, err)
	}
	if len(seen) != 1 || seen[0] != "approved" {
		t.Fatalf("AfterCommit read %q, want [approved]: it runs once, after the commit", seen)
	}
	if _, err := b.Decide(ctx, decider("alice"), Decision{ItemID: id, Approve: false, Deliveries: []string{"d1"}}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the same delivery again: err %v, want ErrDuplicate", err)
	}
	if it, _ := b.Items().Get(ctx, id); it.Status != "approved" {
		t.Fatalf("after the duplicate the item is %q, want approved", it.Status)
	}
	if _, err := b.Decide(ctx, decider("alice"), Decision{ItemID: 99, Approve: true}); !errors.Is(err, ErrNoItem) {
		t.Fatalf("no such item: err %v, want ErrNoItem", err)
	}
}
