package bot

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/adapters/postgres"
	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/kv/kvtest"
	"github.com/countersign/countersign/policy"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// queueStores are the engines the queue tests run on, each through
// kvtest.Twice (every write function run twice, as an engine may).
func queueStores(t *testing.T) map[string]func(t *testing.T) kv.Store {
	return map[string]func(t *testing.T) kv.Store{
		"bbolt": func(t *testing.T) kv.Store {
			db, err := bolt.Open(filepath.Join(t.TempDir(), "q.db"), bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		"postgres": func(t *testing.T) kv.Store {
			db, err := postgres.Open(context.Background(), pgtest.DSN(t), postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
	}
}

// queueSource renders test items: status and expiry kept in the test.
type queueSource struct {
	status  map[string]string
	expires map[string]time.Time
}

func (s queueSource) View(_ kv.Tx, rec ItemRecord) (Item, error) {
	requester := rec.Requester
	if requester == "" {
		requester = "legacy" // an item of an older store: its record names none
	}
	return Item{Title: "item " + rec.Key, Status: s.status[rec.Key], ExpiresAt: s.expires[rec.Key], Requester: "agent [" + requester + "]"}, nil
}

func (queueSource) DecisionCall(ItemRecord, bool, string, []string) (string, map[string]any, error) {
	return "", nil, nil
}

func person(id string, scopes ...string) *Caller {
	return &Caller{Principal: Principal{ID: id, Name: id, Role: policy.RoleMember, Kind: "person", Scopes: scopes}}
}

// queueAll reads every page of reader's queue for q, limit at a time.
func queueAll(t *testing.T, b *Bot, reader *Caller, q QueueQuery) []uint64 {
	t.Helper()
	var ids []uint64
	for pages := 0; ; pages++ {
		p, err := b.Items().Queue(context.Background(), reader, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		if p.Next == 0 {
			return ids
		}
		if pages > 100 {
			t.Fatalf("the pages do not end (next %d), want at most 100 pages", p.Next)
		}
		q.After = p.Next
	}
}

// queueKeys is every key of the queue's buckets, and what the open items
// (items_open) say they must be.
func queueKeys(t *testing.T, b *Bot) (got, want []string) {
	t.Helper()
	err := b.store.View(context.Background(), func(tx kv.Tx) error {
		for _, bucket := range []string{bucketQueue, bucketRequester} {
			if err := tx.Ascend(bucket, nil, nil, func(k, _ []byte) error {
				if !bytes.Equal(k, queueBuilt) {
					got = append(got, bucket+":"+string(k))
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return tx.Ascend(bucketOpen, nil, nil, func(k, v []byte) error {
			e, ok := parseOpen(v)
			if !ok {
				return fmt.Errorf("item %d is open without a queue entry", kv.ParseU64(k))
			}
			id := kv.ParseU64(k)
			for _, p := range e.views() {
				want = append(want, bucketQueue+":"+string(append(p, e.position(id)...)))
			}
			if e.Requester != "" {
				want = append(want, bucketRequester+":"+string(requesterKey(e.Requester, id)))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	return got, want
}

// TestQueue: the queue gives each reader exactly the open items of its
// scopes (and the filters' space and kind), soonest to expire first, every
// one reachable through the pages; its entries follow the items through
// creation, decision and deletion, on bbolt and on PostgreSQL, with every
// write run twice; and a principal past its quota is refused (429) with
// nothing written.
func TestQueue(t *testing.T) {
	for name, open := range queueStores(t) {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			_, key, _ := ed25519.GenerateKey(nil)
			b, err := New(Options{Store: kvtest.Twice(store), SigningKey: key, Now: func() time.Time { return now }, MaxOpenItems: 4})
			if err != nil {
				t.Fatal(err)
			}
			src := queueSource{status: map[string]string{}, expires: map[string]time.Time{}}
			b.Items().RegisterKind(KindAction, src)
			b.Items().RegisterKind(KindQuestion, src)
			ctx := context.Background()
			// Items in spaces a, b and c, from agents x, y, z: the
			// expiry decides the order, then the id; no expiry sorts last.
			type spec struct {
				key, space, channel, agent string
				kind                       ItemKind
				in                         time.Duration // 0: no expiry
			}
			specs := []spec{
				{"1", "a", "", "x", KindAction, 3 * time.Hour},
				{"2", "b", "ops", "y", KindAction, time.Hour},
				{"3", "a", "", "x", KindQuestion, 0},
				{"4", "c", "ops", "z", KindAction, 2 * time.Hour},
				{"5", "b", "", "y", KindQuestion, 30 * time.Minute},
				{"6", "a", "ops", "x", KindAction, time.Hour},
				{"7", "c", "", "z", KindQuestion, 0},
			}
			ids := map[string]uint64{}
			for _, s := range specs {
				var exp time.Time
				if s.in > 0 {
					exp = now.Add(s.in)
				}
				src.status[s.key], src.expires[s.key] = "pending", exp
				call := &Call{bot: b, Tool: &Tool{Name: "t"}, Caller: &Caller{Principal: Principal{ID: s.agent, Name: s.agent, Role: policy.RoleAgent, Kind: "agent"}}, Now: now}
				if err := b.Update(ctx, call, func(tx *Tx) error {
					var err error
					ids[s.key], err = tx.NewItem(s.kind, s.key, Space{UserID: s.space}, s.channel, exp)
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			id := func(keys ...string) []uint64 {
				var out []uint64
				for _, k := range keys {
					out = append(out, ids[k])
				}
				return out
			}
			for _, tc := range []struct {
				name   string
				reader *Caller
				q      QueueQuery
				want   []uint64
			}{
				{"unscoped", person("boss"), QueueQuery{}, id("5", "2", "6", "4", "1", "3", "7")},
				{"scoped to a", person("nurse", "a"), QueueQuery{}, id("6", "1", "3")},
				{"scoped to a and c", person("nurse", "c", "a"), QueueQuery{}, id("6", "4", "1", "3", "7")},
				{"one space", person("boss"), QueueQuery{Space: "b"}, id("5", "2")},
				{"a space out of scope", person("nurse", "a"), QueueQuery{Space: "b"}, nil},
				{"one kind", person("nurse", "a", "c"), QueueQuery{Kind: KindQuestion}, id("3", "7")},
				{"space and kind", person("boss"), QueueQuery{Space: "a", Kind: KindAction}, id("6", "1")},
				{"one channel", person("boss"), QueueQuery{Channel: "ops"}, id("2", "6", "4")},
				{"no read", &Caller{Principal: Principal{ID: "aud", Role: policy.RoleAuditor}}, QueueQuery{}, nil},
			} {
				for _, limit := range []int{1, 2, 500} {
					tc.q.Limit = limit
					if got := queueAll(t, b, tc.reader, tc.q); !slices.Equal(got, tc.want) {
						t.Errorf("%s, %d a page: %v, want %v", tc.name, limit, got, tc.want)
					}
				}
			}
			f, err := b.Items().Facets(ctx, person("nurse", "a", "c"), "")
			if err != nil || f.Kinds[KindAction] != 3 || f.Kinds[KindQuestion] != 2 || !slices.Equal(f.Spaces, []string{"a", "c"}) {
				t.Errorf("facets of a nurse of a and c: %+v %v; want 3 of %v, 2 of %v, spaces [a c]", f, err, KindAction, KindQuestion)
			}
			if f, _ := b.Items().Facets(ctx, person("boss"), ""); !slices.Equal(f.Spaces, []string{"a", "b", "c"}) {
				t.Errorf("spaces of an unscoped reader: %v, want a, b, c", f.Spaces)
			}

			// Quota: x keeps 3 open; with MaxOpenItems 4 one more is
			// allowed, then refused with 429 and nothing written.
			agentX := &Call{bot: b, Tool: &Tool{Name: "t"}, Caller: &Caller{Principal: Principal{ID: "x", Name: "x", Role: policy.RoleAgent, Kind: "agent"}}, Now: now}
			newX := func(key string) error {
				src.status[key] = "pending"
				return b.Update(ctx, agentX, func(tx *Tx) error {
					var err error
					ids[key], err = tx.NewItem(KindAction, key, Space{UserID: "a"}, "", time.Time{})
					return err
				})
			}
			if err := newX("8"); err != nil {
				t.Fatalf("x's 4th open item: %v", err)
			}
			before, _ := queueKeys(t, b)
			err = newX("9")
			if KindOf(err) != KindRateLimited {
				t.Fatalf("x's 5th open item: %v, want a 429", err)
			}
			if after, _ := queueKeys(t, b); !slices.Equal(before, after) {
				t.Fatal("a refused item changed the queue")
			}

			// Decide #6 and #8, drop #2 (retention): they leave the
			// queue, and every entry still matches an open item.
			sys := b.SystemCall(now)
			if err := b.Update(ctx, sys, func(tx *Tx) error {
				src.status["6"], src.status["8"] = "approved", "approved"
				if err := tx.Emit(ids["6"], EventDecided, ""); err != nil {
					return err
				}
				if err := tx.Emit(ids["8"], EventDecided, ""); err != nil {
					return err
				}
				return DropItem(tx.Tx, ids["2"])
			}); err != nil {
				t.Fatal(err)
			}
			if got := queueAll(t, b, person("boss"), QueueQuery{Limit: 2}); !slices.Equal(got, id("5", "4", "1", "3", "7")) {
				t.Errorf("after decisions: %v, want %v", got, id("5", "4", "1", "3", "7"))
			}
			if got, want := queueKeys(t, b); !slices.Equal(got, want) || len(got) != 5*4+5 {
				t.Errorf("queue keys:\n%q\nwant (one per view of each open item, one per requester):\n%q", got, want)
			}
			if err := newX("9"); err != nil {
				t.Fatalf("once two of x's items are decided, a new one: %v", err)
			}

			// A cursor naming a decided item still goes on from where it was.
			p, err := b.Items().Queue(ctx, person("boss"), QueueQuery{After: ids["6"], Limit: 500})
			if err != nil || len(p.Items) == 0 || p.Items[0].ID != ids["4"] {
				t.Errorf("after decided #6: %+v %v; want the page to start at #4 (id %d)", p.Items, err, ids["4"])
			}
			if _, err := b.Items().Queue(ctx, person("boss"), QueueQuery{After: 999, Limit: 5}); KindOf(err) != KindInvalid {
				t.Errorf("after an item that does not exist: %v, want invalid", err)
			}
		})
	}
}

// TestQueueFilesItemsOfAnOlderStore: items opened before the queue
// existed (an items_open value of one byte, no queue entries) are filed by
// the first read, in order, and leave it when decided.
func TestQueueFilesItemsOfAnOlderStore(t *testing.T) {
	b := newTestBot(t)
	src := queueSource{status: map[string]string{}, expires: map[string]time.Time{}}
	b.Items().RegisterKind(KindAction, src)
	ctx := context.Background()
	now := b.Now()
	var ids []uint64
	if err := b.store.Update(ctx, func(tx kv.Tx) error {
		ids = ids[:0]
		for i, in := range []time.Duration{2 * time.Hour, time.Hour, 0} {
			key := fmt.Sprint(i)
			src.status[key] = "pending"
			if in > 0 {
				src.expires[key] = now.Add(in)
			}
			id, err := tx.NextSequence(bucketItems)
			if err != nil {
				return err
			}
			if err := putItem(tx, ItemRecord{ID: id, Kind: KindAction, Key: key, Space: Space{UserID: "a"}, Channel: "default", CreatedAt: now}); err != nil {
				return err
			}
			if err := tx.Put(bucketOpen, kv.U64(id), []byte{1}); err != nil { // as written before the queue
				return err
			}
			ids = append(ids, id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := queueAll(t, b, person("nurse", "a"), QueueQuery{Limit: 2}); !slices.Equal(got, []uint64{ids[1], ids[0], ids[2]}) {
		t.Fatalf("the older store's items: %v, want %v", got, []uint64{ids[1], ids[0], ids[2]})
	}
	if got, want := queueKeys(t, b); !slices.Equal(got, want) || len(got) != 3*4+3 {
		t.Fatalf("queue keys after filing:\n%q\nwant\n%q", got, want)
	}
	src.status["1"] = "approved"
	if err := b.Update(ctx, b.SystemCall(now), func(tx *Tx) error { return tx.Emit(ids[1], EventDecided, "") }); err != nil {
		t.Fatal(err)
	}
	if got, want := queueKeys(t, b); !slices.Equal(got, want) || len(got) != 2*4+2 {
		t.Fatalf("queue keys after a decision:\n%q\nwant\n%q", got, want)
	}
}
