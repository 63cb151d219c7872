package postgres

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
)

// BenchmarkWrites measures durable writes on a cluster with fsync on
// (BENCHMARKS.md): each op is one transaction that puts a 300-byte value
// and appends one entry to the signed audit chain, as a tool call's write
// does; "replicas" stores share the database, each with group commit.
// floor is a bare pgx INSERT per transaction on the same server, driven the
// same way.
func BenchmarkWrites(b *testing.B) {
	c, err := pgtest.Start(pgtest.Options{Fsync: true})
	if err != nil {
		pgtest.Unavailable(b, err)
	}
	defer c.Remove()
	ctx := context.Background()
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	val := make([]byte, 300)
	for _, replicas := range []int{1, 3} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("chain/replicas=%d/writers=%d", replicas, writers), func(b *testing.B) {
				dsn, err := c.CreateDatabase(ctx)
				if err != nil {
					b.Fatal(err)
				}
				var dbs []*DB
				for range replicas {
					db, err := Open(ctx, dsn, Options{GroupCommit: true, MaxConns: 4})
					if err != nil {
						b.Fatal(err)
					}
					defer db.Close()
					dbs = append(dbs, db)
				}
				var n atomic.Int64
				drive(b, writers, func(w int) error {
					i := n.Add(1)
					return dbs[w%replicas].Update(ctx, func(tx kv.Tx) error {
						if err := tx.Put("facts", kv.U64(uint64(i)), val); err != nil {
							return err
						}
						_, err := approvals.Append(tx, key, time.Now(), approvals.Entry{Principal: "bench", Action: "remember", Detail: "x"})
						return err
					})
				})
			})
		}
		if replicas == 1 {
			for _, writers := range []int{1, 64} {
				b.Run(fmt.Sprintf("floor/writers=%d", writers), func(b *testing.B) {
					dsn, err := c.CreateDatabase(ctx)
					if err != nil {
						b.Fatal(err)
					}
					db, err := Open(ctx, dsn, Options{MaxConns: 64})
					if err != nil {
						b.Fatal(err)
					}
					defer db.Close()
					var n atomic.Int64
					drive(b, writers, func(int) error {
						_, err := db.Pool().Exec(ctx, `INSERT INTO countersign_kv (bucket, key, value) VALUES ('floor', $1, $2)`, kv.U64(uint64(n.Add(1))), val)
						return err
					})
				})
			}
		}
	}
}

// drive runs b.N calls of fn from writers goroutines and reports writes/s.
func drive(b *testing.B, writers int, fn func(w int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := fn(w); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}
