package postgres

import (
	"context"
	"errors"
	"net"

	"github.com/countersign/countersign/kv"
	"github.com/jackc/pgx/v5"
)

// tx is a kv.Tx on a pgx transaction. hooks is nil in a read-only one.
type tx struct {
	ctx   context.Context
	t     pgx.Tx
	hooks *kv.Hooks
}

var (
	_ kv.Tx       = (*tx)(nil)
	_ kv.Finisher = (*tx)(nil)
)

// errReadOnly is the answer of a write in a View.
var errReadOnly = errors.New("postgres: write in a read-only transaction")

// errKeyRequired mirrors bbolt's refusal of an empty key.
var errKeyRequired = errors.New("postgres: key required")

func (x *tx) Get(bucket string, key []byte) ([]byte, error) {
	var v []byte
	err := x.t.QueryRow(x.ctx, `SELECT value FROM countersign_kv WHERE bucket = $1 AND key = $2`, bucket, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (x *tx) Put(bucket string, key, value []byte) error {
	if x.hooks == nil {
		return errReadOnly
	}
	if len(key) == 0 {
		return errKeyRequired
	}
	if value == nil {
		value = []byte{}
	}
	_, err := x.t.Exec(x.ctx, `INSERT INTO countersign_kv (bucket, key, value) VALUES ($1, $2, $3)
ON CONFLICT (bucket, key) DO UPDATE SET value = EXCLUDED.value`, bucket, key, value)
	return err
}

func (x *tx) Delete(bucket string, key []byte) error {
	if x.hooks == nil {
		return errReadOnly
	}
	_, err := x.t.Exec(x.ctx, `DELETE FROM countersign_kv WHERE bucket = $1 AND key = $2`, bucket, key)
	return err
}

func (x *tx) NextSequence(bucket string) (uint64, error) {
	if x.hooks == nil {
		return 0, errReadOnly
	}
	var n int64
	err := x.t.QueryRow(x.ctx, `INSERT INTO countersign_seq (bucket, seq) VALUES ($1, 1)
ON CONFLICT (bucket) DO UPDATE SET seq = countersign_seq.seq + 1 RETURNING seq`, bucket).Scan(&n)
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// Scans read in batches, each one statement read to its end, so that the
// callback may run other statements of the transaction (a connection runs
// one at a time). The first batch is small (most scans stop early), later
// ones larger.
const (
	firstBatch = 32
	maxBatch   = 1024
)

func (x *tx) Ascend(bucket string, from, to []byte, fn func(k, v []byte) error) error {
	lo, op := from, ">=" // op is > once lo is the last key of the previous batch
	if lo == nil {
		lo = []byte{}
	}
	for n := firstBatch; ; n = min(n*4, maxBatch) {
		rows, err := x.batch(scanQuery(op, to != nil, "ASC"), bucket, lo, to, n)
		if err != nil {
			return err
		}
		if done, err := feed(rows, n, fn); done || err != nil {
			return err
		}
		lo, op = rows[len(rows)-1][0], ">"
	}
}

func (x *tx) Descend(bucket string, from, to []byte, fn func(k, v []byte) error) error {
	lo := from
	if lo == nil {
		lo = []byte{}
	}
	for n := firstBatch; ; n = min(n*4, maxBatch) {
		// to is exclusive, and so is the last key of the previous batch.
		rows, err := x.batch(scanQuery(">=", to != nil, "DESC"), bucket, lo, to, n)
		if err != nil {
			return err
		}
		if done, err := feed(rows, n, fn); done || err != nil {
			return err
		}
		to = rows[len(rows)-1][0]
	}
}

// scanQuery is the statement of one batch of a scan. Bounds are spelled out
// rather than made optional with "$3 IS NULL OR", so that a generic plan
// still scans the index between them.
func scanQuery(loOp string, hi bool, dir string) string {
	q := "SELECT key, value FROM countersign_kv WHERE bucket = $1 AND key " + loOp + " $2"
	if hi {
		q += " AND key < $3 ORDER BY key " + dir + " LIMIT $4"
	} else {
		q += " ORDER BY key " + dir + " LIMIT $3"
	}
	return q
}

// feed hands a batch to fn. done is true when the scan is over: fn stopped
// it, failed, or the batch was the last (shorter than asked).
func feed(rows [][2][]byte, n int, fn func(k, v []byte) error) (done bool, err error) {
	for _, r := range rows {
		if err := fn(r[0], r[1]); err != nil {
			if errors.Is(err, kv.ErrStop) {
				return true, nil
			}
			return true, err
		}
	}
	return len(rows) < n, nil
}

// batch runs one scan statement and reads all of its rows.
func (x *tx) batch(q, bucket string, lo, hi []byte, n int) ([][2][]byte, error) {
	args := []any{bucket, lo, n}
	if hi != nil {
		args = []any{bucket, lo, hi, n}
	}
	rows, err := x.t.Query(x.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2][]byte
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if v == nil {
			v = []byte{}
		}
		out = append(out, [2][]byte{k, v})
	}
	return out, rows.Err()
}

// Finally implements kv.Finisher on read-write transactions.
func (x *tx) Finally(key string, newHook func() kv.PreCommit) (kv.PreCommit, bool) {
	if x.hooks == nil {
		return nil, false
	}
	return x.hooks.Finally(key, newHook), true
}

func isNetErr(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe)
}
