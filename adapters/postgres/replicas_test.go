package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/countersign/countersign/kv"
)

// TestListenHearsCommittedWritesOfOtherReplicas: a write committed through
// one store reaches the listener of another with its key; a rolled-back
// write and a write to an unwatched bucket do not.
func TestListenHearsCommittedWritesOfOtherReplicas(t *testing.T) {
	dsn := openDSN(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := Open(ctx, dsn, Options{Watch: []string{"watched"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, dsn, Options{Watch: []string{"watched"}, GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	heard := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Listen(ctx, []string{"watched"}, 10*time.Millisecond, func(bucket string, key []byte) {
			heard <- bucket + "/" + string(key)
		})
	}()
	// The listener is up once it hears a first write.
	for ready := false; !ready; {
		if err := b.Update(ctx, func(tx kv.Tx) error { return tx.Put("watched", []byte("ping"), nil) }); err != nil {
			t.Fatal(err)
		}
		select {
		case <-heard:
			ready = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	for len(heard) > 0 {
		<-heard
	}
	_ = b.Update(ctx, func(tx kv.Tx) error {
		_ = tx.Put("watched", []byte("rolled-back"), nil)
		return context.Canceled
	})
	if err := b.Update(ctx, func(tx kv.Tx) error { return tx.Put("other", []byte("unwatched"), nil) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, func(tx kv.Tx) error { return tx.Put("watched", []byte("req_1"), []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	if got := <-heard; got != "watched/req_1" {
		t.Fatalf("first heard %q, want watched/req_1 (nothing of the rolled-back or unwatched writes)", got)
	}
	cancel()
	<-done
}

// TestLeadOneAtATimeAndFailover: of three replicas one leads; when its
// session is terminated by the server, its work is cancelled and another
// replica leads.
func TestLeadOneAtATimeAndFailover(t *testing.T) {
	dsn := openDSN(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const key = 42
	var leading atomic.Int32
	var mu sync.Mutex
	terms := []int{} // which replica led, in order
	var wg sync.WaitGroup
	dbs := make([]*DB, 3)
	for i := range dbs {
		db, err := Open(ctx, dsn, Options{MaxConns: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs[i] = db
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = db.Lead(ctx, key, 20*time.Millisecond, func(lctx context.Context) error {
				leading.Add(1)
				mu.Lock()
				terms = append(terms, i)
				mu.Unlock()
				<-lctx.Done()
				leading.Add(-1)
				return lctx.Err()
			})
		}()
	}
	// Runs before the deferred Closes: a pool's Close waits for the
	// connections the leaders hold, so a failed assertion must end them
	// first or the test hangs instead of failing.
	defer func() { cancel(); wg.Wait() }()
	waitUntil(t, "a leader", func() bool { mu.Lock(); defer mu.Unlock(); return len(terms) == 1 })
	time.Sleep(200 * time.Millisecond) // ten tries of the others
	mu.Lock()
	if len(terms) != 1 || leading.Load() != 1 {
		t.Fatalf("terms %v, %d leading; want one leader", terms, leading.Load())
	}
	mu.Unlock()
	// The server ends the leader's session (as when its replica dies).
	var n int
	err := dbs[0].Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted`, key).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminate the leader's session: %d ended, %v; want 1", n, err)
	}
	waitUntil(t, "another leader", func() bool { mu.Lock(); defer mu.Unlock(); return len(terms) >= 2 && leading.Load() == 1 })
	cancel()
	wg.Wait()
	if leading.Load() != 0 {
		t.Fatal("a leader's work outlived its context")
	}
}

func openDSN(t *testing.T) string {
	t.Helper()
	return pgtest.DSN(t)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
