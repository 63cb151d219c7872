package postgres

import (
	"context"
	"fmt"
	"strings"

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
	// 2: wake-ups across replicas. A committed write to a watched bucket
	// notifies channel countersign_<bucket> with the key in hex (NOTIFY is
	// delivered at commit, and only if the transaction commits). Which
	// buckets are watched is set by Open (Options.Watch), which replaces
	// countersign_watched; none until then.
	`CREATE OR REPLACE FUNCTION countersign_watched(b text) RETURNS boolean
	LANGUAGE sql IMMUTABLE AS $$ SELECT false $$;
CREATE OR REPLACE FUNCTION countersign_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF countersign_watched(NEW.bucket) THEN
		PERFORM pg_notify('countersign_' || NEW.bucket, encode(NEW.key, 'hex'));
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER countersign_notify AFTER INSERT OR UPDATE ON countersign_kv
	FOR EACH ROW EXECUTE FUNCTION countersign_notify();`,
	// 3: rate limits shared by the replicas (RateLimits). One row per
	// limiter and key: the bucket's theoretical arrival time (GCRA), in
	// microseconds since the epoch. UNLOGGED: a take writes no WAL and
	// waits for no flush; a crash of the database empties the table, which
	// is every bucket full again.
	`CREATE UNLOGGED TABLE IF NOT EXISTS countersign_rate (
	name text COLLATE "C" NOT NULL,
	key text COLLATE "C" NOT NULL,
	tat bigint NOT NULL,
	ok boolean NOT NULL,
	PRIMARY KEY (name, key)
);`,
	// 4: the writer's lock (beginWrite): every write transaction locks
	// this table first and holds it to its end. It holds no rows.
	`CREATE TABLE IF NOT EXISTS countersign_writer ();`,
}

// setWatched makes the notify trigger watch exactly buckets.
func setWatched(ctx context.Context, conn *pgxpool.Conn, buckets []string) error {
	for _, b := range buckets {
		if !validBucket(b) {
			return fmt.Errorf("watch bucket %q: want lower-case letters, digits and _", b)
		}
	}
	body := "SELECT false"
	if len(buckets) > 0 {
		body = "SELECT b IN ('" + strings.Join(buckets, "', '") + "')"
	}
	_, err := conn.Exec(ctx, `CREATE OR REPLACE FUNCTION countersign_watched(b text) RETURNS boolean
	LANGUAGE sql IMMUTABLE AS $$ `+body+` $$`)
	return err
}

func validBucket(b string) bool {
	if b == "" || len(b) > 40 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// SchemaVersion is the version the binary migrates the schema to.
func SchemaVersion() int { return len(migrations) }

// migrate brings the schema to SchemaVersion under the advisory lock, each
// migration in a transaction of its own with its version row. It refuses a
// schema newer than the binary's (a rolled-back binary on a migrated
// database).
func migrate(ctx context.Context, pool *pgxpool.Pool, watch []string) error {
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
	return setWatched(ctx, conn, watch)
}
