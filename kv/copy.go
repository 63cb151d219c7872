package kv

import (
	"bytes"
	"context"
	"fmt"
	"sort"
)

// Copier is a Store whose buckets can be listed and whose sequences can be
// set: what Copy needs of both ends. Both engines implement it.
type Copier interface {
	Store
	// Buckets returns every bucket with its sequence (the last number
	// NextSequence handed out).
	Buckets(ctx context.Context) (map[string]uint64, error)
	// SetSequence sets a bucket's sequence, creating the bucket.
	SetSequence(ctx context.Context, bucket string, seq uint64) error
}

// NotEmptyError is Copy's refusal of a target that already holds buckets:
// a copy goes only into a new store, so that two histories never mix.
type NotEmptyError struct {
	// Buckets is how many buckets the target holds.
	Buckets int
}

func (e *NotEmptyError) Error() string {
	return fmt.Sprintf("kv: the target store is not empty (%d buckets)", e.Buckets)
}

// CopyReport says what Copy copied.
type CopyReport struct {
	Buckets int // buckets copied
	Keys    int // keys copied, in all buckets
}

// CopyBatch is how many keys one write transaction of Copy takes.
const CopyBatch = 500

// Copy copies every bucket of from into the empty store to, key by key in
// batches of CopyBatch (each batch read from where the last ended and
// written in a transaction of its own), then sets each bucket's sequence,
// so that the copy goes on numbering where the original left off. Buckets
// are copied in name order. A target that holds any bucket is refused
// with a *NotEmptyError before anything is written. Nothing else may write
// either store meanwhile: stop every server of both first.
func Copy(ctx context.Context, from, to Copier) (CopyReport, error) {
	have, err := to.Buckets(ctx)
	if err != nil {
		return CopyReport{}, err
	}
	if len(have) > 0 {
		return CopyReport{}, &NotEmptyError{Buckets: len(have)}
	}
	buckets, err := from.Buckets(ctx)
	if err != nil {
		return CopyReport{}, err
	}
	names := make([]string, 0, len(buckets))
	for name := range buckets {
		names = append(names, name)
	}
	sort.Strings(names)
	rep := CopyReport{Buckets: len(names)}
	for _, name := range names {
		n, err := copyBucket(ctx, from, to, name)
		if err != nil {
			return rep, fmt.Errorf("copy bucket %s: %w", name, err)
		}
		if buckets[name] > 0 {
			if err := to.SetSequence(ctx, name, buckets[name]); err != nil {
				return rep, fmt.Errorf("copy bucket %s: %w", name, err)
			}
		}
		rep.Keys += n
	}
	return rep, nil
}

// copyBucket copies one bucket in batches, each read from where the last
// ended and written in a transaction of its own.
func copyBucket(ctx context.Context, from, to Store, bucket string) (int, error) {
	var after []byte
	total := 0
	for {
		type row struct{ k, v []byte }
		var rows []row
		err := from.View(ctx, func(tx Tx) error {
			rows = rows[:0]
			start := after
			if start != nil {
				start = append(bytes.Clone(after), 0) // the smallest key after it
			}
			return tx.Ascend(bucket, start, nil, func(k, v []byte) error {
				rows = append(rows, row{bytes.Clone(k), bytes.Clone(v)})
				if len(rows) == CopyBatch {
					return ErrStop
				}
				return nil
			})
		})
		if err != nil || len(rows) == 0 {
			return total, err
		}
		err = to.Update(ctx, func(tx Tx) error {
			for _, r := range rows {
				if err := tx.Put(bucket, r.k, r.v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += len(rows)
		after = rows[len(rows)-1].k
		if len(rows) < CopyBatch {
			return total, nil
		}
	}
}
