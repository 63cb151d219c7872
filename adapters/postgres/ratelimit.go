package postgres

import (
	"context"
	"fmt"
	"math"
	"time"
)

// RateLimits are token buckets in the database, shared by every replica
// (bot.TokenBuckets): a principal's limit is the same with one replica or
// five. A take is one statement, outside the write lock and in a table
// that is not WAL-logged, so it costs one round trip and no disk flush.
//
// Each bucket is a generic cell rate algorithm's single timestamp (its
// theoretical arrival time, TAT): a take at now is allowed when
// max(TAT, now) - now <= (burst-1) × interval, and then moves TAT to
// max(TAT, now) + interval, where interval is 1/perSec. That is a token
// bucket of burst tokens refilled at perSec. The replicas' clocks are the
// time; keep them in sync (NTP): a replica ahead by d grants up to
// d × perSec tokens early.
type RateLimits struct{ d *DB }

// RateLimits returns the shared rate limits of d.
func (d *DB) RateLimits() *RateLimits { return &RateLimits{d: d} }

// takeStatement takes one token: $3 now, $4 the interval, $5 the
// tolerance (burst-1) × interval, all in microseconds. A new bucket is
// full, so its first take is allowed. Every expression of the UPDATE reads
// the row as it was, under the row's lock: concurrent takes from any
// replica are applied one after another.
const takeStatement = `INSERT INTO countersign_rate AS r (name, key, tat, ok) VALUES ($1, $2, $3::bigint + $4::bigint, true)
ON CONFLICT (name, key) DO UPDATE SET
	ok = greatest(r.tat, $3) - $3 <= $5::bigint,
	tat = CASE WHEN greatest(r.tat, $3) - $3 <= $5 THEN greatest(r.tat, $3) + $4 ELSE r.tat END
RETURNING tat, ok`

// Take implements bot.TokenBuckets.
func (r *RateLimits) Take(ctx context.Context, name, key string, perSec float64, burst int, now time.Time) (bool, time.Duration, error) {
	if perSec <= 0 || burst < 1 {
		return false, 0, fmt.Errorf("postgres: rate limit %s: want a positive rate and burst", name)
	}
	interval := int64(math.Ceil(1e6 / perSec))
	tolerance := int64(burst-1) * interval
	at := now.UnixMicro()
	var tat int64
	var ok bool
	err := r.d.retry(ctx, func() error {
		return r.d.pool.QueryRow(ctx, takeStatement, name, key, at, interval, tolerance).Scan(&tat, &ok)
	})
	if err != nil {
		return false, 0, fmt.Errorf("postgres: rate limit: %w", classify(err))
	}
	if ok {
		return true, 0, nil
	}
	return false, time.Duration(max(tat-at-tolerance, 1)) * time.Microsecond, nil
}

// Prune deletes the buckets that are full again by now (a full bucket and
// a missing one behave alike), so that keys seen once do not stay; the
// sweeper runs it. It returns how many it deleted.
func (r *RateLimits) Prune(ctx context.Context, now time.Time) (int, error) {
	tag, err := r.d.pool.Exec(ctx, `DELETE FROM countersign_rate WHERE tat < $1`, now.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("postgres: prune rate limits: %w", classify(err))
	}
	return int(tag.RowsAffected()), nil
}
