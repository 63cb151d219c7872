package bolt

import (
	"context"

	bbolt "go.etcd.io/bbolt"
)

// Buckets returns every bucket of the store with its sequence (the last
// number NextSequence handed out), for a copy of the whole store to
// another engine.
func (d *DB) Buckets(ctx context.Context) (map[string]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	err := d.db.View(func(t *bbolt.Tx) error {
		return t.ForEach(func(name []byte, b *bbolt.Bucket) error {
			out[string(name)] = b.Sequence()
			return nil
		})
	})
	return out, err
}

// SetSequence sets bucket's sequence (creating the bucket), so that a copy
// of a store goes on numbering where the original left off.
func (d *DB) SetSequence(ctx context.Context, bucket string, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.Err(); err != nil {
		return err
	}
	return d.db.Update(func(t *bbolt.Tx) error {
		b, err := t.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		return b.SetSequence(seq)
	})
}
