//go:build unix

package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/countersign/countersign/config"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkEngines is the previous round's PostgreSQL table of
// BENCHMARKS.md (BenchmarkPostgresFloors gives the ratios now): the whole server
// (run serve, in process) on bbolt and on PostgreSQL with fsync on, in one
// run: remember from 1 and 64 writers, check_before_act from 1 and 32
// clients; and the floors, a bare pgx INSERT per transaction from 1 and 64
// writers and a bare pgx SELECT by key from 1 and 32 clients, on the same
// PostgreSQL server.
//
//	go test -run '^$' -bench Engines -benchtime 3s ./cmd/countersign
func BenchmarkEngines(b *testing.B) {
	c, err := pgtest.Start(pgtest.Options{Fsync: true})
	if err != nil {
		pgtest.Unavailable(b, err)
	}
	defer c.Remove()
	ctx := context.Background()
	for _, engine := range []string{config.EngineBolt, config.EnginePostgres} {
		b.Run("engine="+engine, func(b *testing.B) {
			store, env := "", map[string]string{}
			if engine == config.EnginePostgres {
				dsn, err := c.CreateDatabase(ctx)
				if err != nil {
					b.Fatal(err)
				}
				store, env["COUNTERSIGN_DATABASE_URL"] = "  engine: postgres\n  postgres:\n    max_conns: 16\n", dsn
			}
			url, key := benchServerOn(b, store, env)
			var n atomic.Int64
			for _, writers := range []int{1, 64} {
				b.Run(fmt.Sprintf("remember/writers=%d", writers), func(b *testing.B) {
					cl := benchClient()
					parallel(b, writers, func() error {
						return benchCall(cl, url, key, "remember", fmt.Sprintf(`{"subject":"diet","value":"v-%d"}`, n.Add(1)))
					})
				})
			}
			for _, clients := range []int{1, 32} {
				b.Run(fmt.Sprintf("check_before_act/clients=%d", clients), func(b *testing.B) {
					cl := benchClient()
					parallel(b, clients, func() error { return benchCall(cl, url, key, "check_before_act", benchCheckBody) })
				})
			}
		})
	}
	b.Run("floor=pgx-insert", func(b *testing.B) {
		dsn, err := c.CreateDatabase(ctx)
		if err != nil {
			b.Fatal(err)
		}
		pcfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			b.Fatal(err)
		}
		pcfg.MaxConns = 64
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, `CREATE TABLE floor (id bigint PRIMARY KEY, v bytea)`); err != nil {
			b.Fatal(err)
		}
		val := make([]byte, 300)
		var n atomic.Int64
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
				parallel(b, writers, func() error {
					_, err := pool.Exec(ctx, `INSERT INTO floor (id, v) VALUES ($1, $2)`, n.Add(1), val)
					return err
				})
			})
		}
	})
	// The floor of a read: one SELECT round trip by primary key.
	b.Run("floor=pgx-select", func(b *testing.B) {
		dsn, err := c.CreateDatabase(ctx)
		if err != nil {
			b.Fatal(err)
		}
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, `CREATE TABLE floor (id bigint PRIMARY KEY, v bytea); INSERT INTO floor SELECT g, '\x00' FROM generate_series(1, 1000) g`); err != nil {
			b.Fatal(err)
		}
		var n atomic.Int64
		for _, clients := range []int{1, 32} {
			b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
				parallel(b, clients, func() error {
					var v []byte
					return pool.QueryRow(ctx, `SELECT v FROM floor WHERE id = $1`, n.Add(1)%1000+1).Scan(&v)
				})
			})
		}
	})
}

// parallel runs b.N calls of fn from k goroutines.
func parallel(b *testing.B, k int, fn func() error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := fn(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
