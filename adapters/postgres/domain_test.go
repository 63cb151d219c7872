package postgres

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// TestAuditChainAcrossReplicas: three stores on one database (three
// replicas, group commit each) append concurrently to the audit chain; it
// stays one chain, every acknowledged entry is in it once, and it verifies.
func TestAuditChainAcrossReplicas(t *testing.T) {
	dsn := openDSN(t)
	ctx := context.Background()
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	var dbs []*DB
	for range 3 {
		db, err := Open(ctx, dsn, Options{GroupCommit: true, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs = append(dbs, db)
	}
	const writers, each = 24, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	seqs := map[uint64]string{}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var e approvals.Entry
				detail := fmt.Sprintf("w%d-%d", w, i)
				err := dbs[w%3].Update(ctx, func(tx kv.Tx) error {
					var err error
					e, err = approvals.Append(tx, key, time.Now(), approvals.Entry{Principal: "test", Action: "write", Detail: detail})
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, dup := seqs[e.Seq]; dup {
					t.Errorf("seq %d handed to %s and %s", e.Seq, prev, detail)
				}
				seqs[e.Seq] = detail
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rep, err := approvals.Verify(ctx, dbs[1], key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact || rep.Entries != writers*each || len(seqs) != writers*each {
		t.Fatalf("chain intact %v (%s at %d), %d entries, %d acknowledged; want %d", rep.Intact, rep.Reason, rep.BrokenAt, rep.Entries, len(seqs), writers*each)
	}
}

// TestOutboxOnPostgres: events queued in a transaction are pending for
// their sink, in order, and gone once delivered.
func TestOutboxOnPostgres(t *testing.T) {
	db := open(t, Options{GroupCommit: true})
	ctx := context.Background()
	b, err := bot.New(bot.Options{Store: db, SigningKey: ed25519.NewKeyFromSeed(make([]byte, 32)), Sinks: []string{"slack"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for id := uint64(1); id <= 3; id++ {
		if err := b.Update(ctx, b.SystemCall(now), func(tx *bot.Tx) error { return tx.Emit(id, bot.EventCreated, "") }); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := b.Outbox().Due(ctx, "slack", now.Add(time.Second), 10)
	if err != nil || len(evs) != 3 || evs[0].ItemID != 1 || evs[2].ItemID != 3 {
		t.Fatalf("pending: %+v, %v; want 3 events, the first of item 1, the last of item 3", evs, err)
	}
	if err := b.Outbox().Delivered(ctx, evs[0]); err != nil {
		t.Fatal(err)
	}
	evs, err = b.Outbox().Due(ctx, "slack", now.Add(time.Second), 10)
	if err != nil || len(evs) != 2 || evs[0].ItemID != 2 {
		t.Fatalf("after one delivery: %+v, %v; want 2 events, the first of item 2", evs, err)
	}
}
