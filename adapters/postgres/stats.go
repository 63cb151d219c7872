package postgres

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Stats counts what the store asked of the database since Open, for
// measuring a tool call's cost (BENCHMARKS.md) and for tests that hold it.
type Stats struct {
	// RoundTrips are the client's waits for the server: every statement
	// sent on its own (BEGIN and COMMIT included), every batch (its
	// statements pipelined in one), every statement prepared.
	RoundTrips uint64
	// Statements are the statements run, those of batches included.
	Statements uint64
	// Transactions are the transactions run (each attempt counts).
	Transactions uint64
}

// Sub returns s - o, field by field.
func (s Stats) Sub(o Stats) Stats {
	return Stats{RoundTrips: s.RoundTrips - o.RoundTrips, Statements: s.Statements - o.Statements, Transactions: s.Transactions - o.Transactions}
}

// Stats returns the counts so far.
func (d *DB) Stats() Stats {
	return Stats{RoundTrips: d.stats.roundTrips.Load(), Statements: d.stats.statements.Load(), Transactions: d.stats.transactions.Load()}
}

// counter is the pool's tracer: it counts, and traces nothing else.
type counter struct {
	roundTrips, statements, transactions atomic.Uint64
}

var (
	_ pgx.QueryTracer   = (*counter)(nil)
	_ pgx.BatchTracer   = (*counter)(nil)
	_ pgx.PrepareTracer = (*counter)(nil)
)

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.roundTrips.Add(1)
	c.statements.Add(1)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}
func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.statements.Add(1)
}
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
func (c *counter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}
func (c *counter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}
