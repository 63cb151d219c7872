package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/kv/kvtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// open opens a store on a fresh database of the shared cluster.
func open(t *testing.T, opt Options) *DB {
	t.Helper()
	db, err := Open(context.Background(), pgtest.DSN(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestContract runs the kv contract suite on PostgreSQL, with and without
// group commit.
func TestContract(t *testing.T) {
	for _, group := range []bool{false, true} {
		name := "Plain"
		if group {
			name = "GroupCommit"
		}
		t.Run(name, func(t *testing.T) {
			kvtest.Run(t, func(t *testing.T) kv.Store { return open(t, Options{GroupCommit: group}) })
		})
	}
}

// TestMigrationsUnderConcurrentStarts: replicas that start together on an
// empty database migrate it once, and every one of them works.
func TestMigrationsUnderConcurrentStarts(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	const n = 4
	dbs := make([]*DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = Open(ctx, dsn, Options{MaxConns: 2})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	var versions, rows int
	if err := dbs[0].Pool().QueryRow(ctx, `SELECT count(*), max(version) FROM countersign_schema`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows != SchemaVersion() || versions != SchemaVersion() {
		t.Fatalf("schema rows %d, version %d; want each migration once, up to %d", rows, versions, SchemaVersion())
	}
	for i, db := range dbs {
		if err := db.Update(ctx, func(tx kv.Tx) error { return tx.Put("b", kv.U64(uint64(i+1)), []byte("x")) }); err != nil {
			t.Fatal(err)
		}
	}
	// A binary older than the schema refuses it rather than corrupt it.
	if _, err := dbs[0].Pool().Exec(ctx, `INSERT INTO countersign_schema (version) VALUES ($1)`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, dsn, Options{})
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("open on a newer schema: %v, want an error saying %q", err, "newer than this binary")
	}
}

// TestUnavailableAndRecovery: with the database stopped, reads and writes
// fail with kv.ErrUnavailable (never a success, never a hang); once it is
// back the same store works again, and nothing unacknowledged was written.
func TestUnavailableAndRecovery(t *testing.T) {
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	defer c.Remove()
	ctx := context.Background()
	dsn, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, group := range []bool{false, true} {
		db, err := Open(ctx, dsn, Options{GroupCommit: group, ConnectTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		key := []byte(fmt.Sprintf("k-%v", group))
		if err := db.Update(ctx, func(tx kv.Tx) error { return tx.Put("b", key, []byte("before")) }); err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		err = db.Update(ctx, func(tx kv.Tx) error { return tx.Put("b", key, []byte("during")) })
		if !errors.Is(err, kv.ErrUnavailable) {
			t.Fatalf("group=%v: write while down: %v, want ErrUnavailable", group, err)
		}
		err = db.View(ctx, func(tx kv.Tx) error { _, err := tx.Get("b", key); return err })
		if !errors.Is(err, kv.ErrUnavailable) {
			t.Fatalf("group=%v: read while down: %v, want ErrUnavailable", group, err)
		}
		if err := db.Ping(ctx); !errors.Is(err, kv.ErrUnavailable) {
			t.Fatalf("ping while down: %v, want kv.ErrUnavailable", err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		var v []byte
		err = db.View(ctx, func(tx kv.Tx) error { v, err = tx.Get("b", key); return err })
		if err != nil || string(v) != "before" {
			t.Fatalf("group=%v: after recovery: %q, %v; want %q", group, v, err, "before")
		}
		if err := db.Update(ctx, func(tx kv.Tx) error { return tx.Put("b", key, []byte("after")) }); err != nil {
			t.Fatalf("group=%v: write after recovery: %v", group, err)
		}
		db.Close()
	}
}

// TestBadDSNStaysSecret: a DSN that does not parse is reported without its
// text, which may hold a password.
func TestBadDSNStaysSecret(t *testing.T) {
	_, err := Open(context.Background(), "postgres://u:s3cret@[bad", Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("err = %v, want an error without the DSN's password %q", err, "s3cret")
	}
}
