package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationLock is the advisory lock key under which the schema is migrated
// ("Countersign" folded into 63 bits); replicas starting together wait for
// one another here.
const migrationLock int64 = 0x436f756e74657273

// migrations are the schema's versions, in order; migration i+1 brings the
// schema from version i to i+1. Never edit one that has shipped: append.
var migrations = []string{
	// 1: the buckets and their sequences.
	`CREATE TABLE IF NOT EXISTS countersign_kv (
	bucket text COLLATE "C" NOT NULL,
	key bytea NOT NULL,
	value bytea NOT NULL,
	PRIMARY KEY (bucket, key)
);
CREATE TABLE IF NOT EXISTS countersign_seq (
	bucket text COLLATE "C" PRIMARY KEY,
	seq bigint NOT NULL
);`,
}

// SchemaVersion is the version the binary migrates the schema to.
func SchemaVersion() int { return len(migrations) }

// migrate brings the schema to SchemaVersion under the advisory lock, each
// migration in a transaction of its own with its version row. It refuses a
// schema newer than the binary's (a rolled-back binary on a migrated
// database).
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS countersign_schema (
	version integer PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
		return err
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM countersign_schema`).Scan(&have); err != nil {
		return err
	}
	if have > len(migrations) {
		return fmt.Errorf("the database's schema is version %d, newer than this binary's %d: run the newer Countersign", have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		t, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := t.Exec(ctx, migrations[v-1]); err != nil {
			_ = t.Rollback(ctx)
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := t.Exec(ctx, `INSERT INTO countersign_schema (version) VALUES ($1)`, v); err != nil {
			_ = t.Rollback(ctx)
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if err := t.Commit(ctx); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return nil
}
