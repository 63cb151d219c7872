package postgres

import (
	"context"
	"fmt"
)

// Buckets returns every bucket that holds a key or has a sequence, with its
// sequence (the last number NextSequence handed out, 0 for none), for a
// copy of the whole store to another engine.
func (d *DB) Buckets(ctx context.Context) (map[string]uint64, error) {
	rows, err := d.pool.Query(ctx, `SELECT b.bucket, coalesce(s.seq, 0) FROM
	(SELECT DISTINCT bucket FROM countersign_kv UNION SELECT bucket FROM countersign_seq) b
	LEFT JOIN countersign_seq s ON s.bucket = b.bucket`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list buckets: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var name string
		var seq int64
		if err := rows.Scan(&name, &seq); err != nil {
			return nil, err
		}
		out[name] = uint64(seq)
	}
	return out, classify(rows.Err())
}

// SetSequence sets bucket's sequence, so that a copy of a store goes on
// numbering where the original left off.
func (d *DB) SetSequence(ctx context.Context, bucket string, seq uint64) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO countersign_seq (bucket, seq) VALUES ($1, $2)
ON CONFLICT (bucket) DO UPDATE SET seq = EXCLUDED.seq`, bucket, int64(seq))
	return classify(err)
}
