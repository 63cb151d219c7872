package postgres

import (
	"context"
	"fmt"
	"time"
)

// tables are Countersign's tables, the ones Compact vacuums.
var tables = []string{"countersign_kv", "countersign_seq", "countersign_rate"}

// CompactReport says what Compact did.
type CompactReport struct {
	Full          bool
	Before, After int64 // bytes on disk of the tables and their indexes
	Keys          int64
	Took          time.Duration
}

// Compact vacuums Countersign's tables and updates their statistics
// (VACUUM (ANALYZE)): the space of deleted rows (retention, pruned
// buckets) becomes reusable and the planner sees the tables as they are.
// It runs while replicas serve. full rewrites the tables without their
// dead space and gives it back to the disk (VACUUM (FULL, ANALYZE)): it
// holds an exclusive lock on each table while it is rewritten, so every
// replica's calls wait meanwhile (run it in a maintenance window); it needs
// free disk for a copy of the largest table. No statement timeout applies.
func (d *DB) Compact(ctx context.Context, full bool) (CompactReport, error) {
	start := time.Now()
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return CompactReport{}, fmt.Errorf("postgres: %w", unavailable(err))
	}
	// The session's settings are changed: never hand it back to the pool.
	defer func() {
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}()
	size := func() (int64, error) {
		var n int64
		err := conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(t)), 0)::bigint FROM unnest($1::regclass[]) t`, tables).Scan(&n)
		return n, err
	}
	rep := CompactReport{Full: full}
	if _, err := conn.Exec(ctx, `SET statement_timeout = 0`); err != nil {
		return rep, fmt.Errorf("postgres: compact: %w", classify(err))
	}
	if rep.Before, err = size(); err != nil {
		return rep, fmt.Errorf("postgres: compact: %w", classify(err))
	}
	opts := "ANALYZE"
	if full {
		opts = "FULL, ANALYZE"
	}
	for _, t := range tables {
		if _, err := conn.Exec(ctx, "VACUUM ("+opts+") "+t); err != nil {
			return rep, fmt.Errorf("postgres: compact: VACUUM %s: %w", t, classify(err))
		}
	}
	if rep.After, err = size(); err != nil {
		return rep, fmt.Errorf("postgres: compact: %w", classify(err))
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM countersign_kv`).Scan(&rep.Keys); err != nil {
		return rep, fmt.Errorf("postgres: compact: %w", classify(err))
	}
	rep.Took = time.Since(start)
	return rep, nil
}
