package postgres

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sort"

	"github.com/countersign/countersign/kv"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is what a transaction sends its statements on: a connection of
// the pool, in a transaction begun by hand (so that BEGIN and COMMIT can
// travel in one round trip with other statements).
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// tx is a kv.Tx on a transaction of one connection. hooks is nil in a
// read-only one.
//
// Round trips are what a transaction costs on PostgreSQL, so:
//   - what begins the transaction (BEGIN, the writer's lock, the
//     prefetched keys and sequences) is not sent on its own: it travels
//     with the first statement;
//   - writes are buffered (puts, by bucket and key; nil is a delete) and
//     sent at commit, all of them in one round trip with the COMMIT; a Get
//     of a buffered key answers from the buffer, and a scan of a bucket
//     with buffered writes sends that bucket's first (one round trip), so
//     every read sees the transaction's own writes;
//   - in a write transaction, what was read is kept (seen): the snapshot
//     does not change under the transaction, so a key read twice, or a key
//     inside a range scanned whole, is answered without asking again (a
//     read-only one, short and on the verdicts' path, keeps nothing);
//   - sequences are read once and counted here, and written at commit.
type tx struct {
	ctx   context.Context
	q     querier
	begin []string  // what begins the transaction, still to send with its first statement
	pre   *Prefetch // what to read with the BEGIN, still to send; nil once sent or when none
	hooks *kv.Hooks

	puts map[string]map[string][]byte // bucket -> key -> value; a nil value is a delete
	seqs map[string]int64             // bucket -> the last number handed out

	// seen holds the values read from the snapshot, or written to it by a
	// flush (bucket -> key -> value; nil: absent), and whole the ranges
	// [lo, hi) (hi nil: to the end) whose every key is in seen.
	seen  map[string]map[string][]byte
	whole map[string][][2][]byte
}

// Prefetch names what nearly every write transaction reads (the audit
// chain's head and its sequence): they are read in the round trip that
// begins the transaction, instead of one round trip each when first asked
// for. Reading one that the transaction never asks for costs an index
// lookup on the server, and no round trip.
type Prefetch struct {
	// Keys are read with Get's semantics, by bucket and key.
	Keys []Key
	// Sequences are buckets whose sequence NextSequence will count on.
	Sequences []string
}

// Key names one key of one bucket.
type Key struct {
	Bucket string
	Key    []byte
}

// has reports whether p reads key of bucket.
func (p *Prefetch) has(bucket string, key []byte) bool {
	for _, k := range p.Keys {
		if k.Bucket == bucket && bytes.Equal(k.Key, key) {
			return true
		}
	}
	return false
}

// hasSequence reports whether p reads bucket's sequence.
func (p *Prefetch) hasSequence(bucket string) bool {
	for _, b := range p.Sequences {
		if b == bucket {
			return true
		}
	}
	return false
}

// The statements of a Prefetch.
const (
	prefetchKeys = `SELECT k.bucket, k.key, k.value FROM countersign_kv k
JOIN unnest($1::text[], $2::bytea[]) AS u(b, k2) ON k.bucket = u.b AND k.key = u.k2`
	prefetchSeqs = `SELECT bucket, seq FROM countersign_seq WHERE bucket = ANY($1::text[])`
)

var (
	_ kv.Tx       = (*tx)(nil)
	_ kv.Finisher = (*tx)(nil)
)

// errReadOnly is the answer of a write in a View.
var errReadOnly = errors.New("postgres: write in a read-only transaction")

// errKeyRequired mirrors bbolt's refusal of an empty key.
var errKeyRequired = errors.New("postgres: key required")

// read runs one statement and hands its rows to fn, sending a pending
// BEGIN in the same round trip.
func (x *tx) read(fn func(pgx.Rows) error, sql string, args ...any) error {
	var rows pgx.Rows
	if len(x.begin) > 0 {
		b := &pgx.Batch{}
		take := x.queueBegin(b, true)
		b.Queue(sql, args...)
		br := x.q.SendBatch(x.ctx, b)
		defer br.Close()
		if err := take(br); err != nil {
			return err
		}
		var err error
		if rows, err = br.Query(); err != nil {
			return err
		}
	} else {
		var err error
		if rows, err = x.q.Query(x.ctx, sql, args...); err != nil {
			return err
		}
	}
	defer rows.Close()
	if err := fn(rows); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

func (x *tx) Get(bucket string, key []byte) ([]byte, error) {
	if v, ok := x.puts[bucket][string(key)]; ok {
		if v == nil {
			return nil, nil
		}
		return bytes.Clone(v), nil
	}
	if x.pre != nil && x.pre.has(bucket, key) {
		if err := x.start(); err != nil {
			return nil, err
		}
	}
	if v, ok := x.lookup(bucket, key); ok {
		return bytes.Clone(v), nil // nil stays nil: absent
	}
	var v []byte
	found := false
	err := x.read(func(rows pgx.Rows) error {
		if rows.Next() {
			found = true
			return rows.Scan(&v)
		}
		return nil
	}, `SELECT value FROM countersign_kv WHERE bucket = $1 AND key = $2`, bucket, key)
	if err != nil {
		return nil, err
	}
	if found && v == nil {
		v = []byte{}
	}
	if x.hooks == nil {
		return v, nil // a read-only transaction keeps nothing
	}
	x.note(bucket, string(key), v)
	return bytes.Clone(v), nil // the caller's copy, never the one kept
}

// lookup answers a Get from what the transaction has read: ok is false
// when it must ask the database. v is nil for a key known to be absent.
func (x *tx) lookup(bucket string, key []byte) (v []byte, ok bool) {
	if v, ok := x.seen[bucket][string(key)]; ok {
		return v, true
	}
	for _, r := range x.whole[bucket] {
		if bytes.Compare(key, r[0]) >= 0 && (r[1] == nil || bytes.Compare(key, r[1]) < 0) {
			return nil, true
		}
	}
	return nil, false
}

// note records v (nil: absent) as key's value in the snapshot as the
// write transaction sees it.
func (x *tx) note(bucket, key string, v []byte) {
	if x.hooks == nil {
		return
	}
	if x.seen == nil {
		x.seen = map[string]map[string][]byte{}
	}
	m := x.seen[bucket]
	if m == nil {
		m = map[string][]byte{}
		x.seen[bucket] = m
	}
	m[key] = v
}

// noteWhole records the rows of a scan that read all of [lo, hi).
func (x *tx) noteWhole(bucket string, lo, hi []byte, rows [][2][]byte) {
	if x.hooks == nil {
		return
	}
	for _, r := range rows {
		x.note(bucket, string(r[0]), r[1])
	}
	if x.whole == nil {
		x.whole = map[string][][2][]byte{}
	}
	x.whole[bucket] = append(x.whole[bucket], [2][]byte{bytes.Clone(lo), bytes.Clone(hi)})
}

func (x *tx) Put(bucket string, key, value []byte) error {
	if x.hooks == nil {
		return errReadOnly
	}
	if len(key) == 0 {
		return errKeyRequired
	}
	x.buffer(bucket, key, append([]byte{}, value...)) // never nil: nil is a delete
	return nil
}

func (x *tx) Delete(bucket string, key []byte) error {
	if x.hooks == nil {
		return errReadOnly
	}
	if len(key) == 0 {
		return nil // no such key: bbolt's answer too
	}
	x.buffer(bucket, key, nil)
	return nil
}

func (x *tx) buffer(bucket string, key, value []byte) {
	if x.puts == nil {
		x.puts = map[string]map[string][]byte{}
	}
	m := x.puts[bucket]
	if m == nil {
		m = map[string][]byte{}
		x.puts[bucket] = m
	}
	m[string(key)] = value
}

func (x *tx) NextSequence(bucket string) (uint64, error) {
	if x.hooks == nil {
		return 0, errReadOnly
	}
	n, ok := x.seqs[bucket]
	if !ok && x.pre != nil && x.pre.hasSequence(bucket) {
		if err := x.start(); err != nil {
			return 0, err
		}
		n, ok = x.seqs[bucket]
	}
	if !ok {
		err := x.read(func(rows pgx.Rows) error {
			if rows.Next() {
				return rows.Scan(&n)
			}
			return nil
		}, `SELECT seq FROM countersign_seq WHERE bucket = $1`, bucket)
		if err != nil {
			return 0, err
		}
		if x.seqs == nil {
			x.seqs = map[string]int64{}
		}
	}
	n++
	x.seqs[bucket] = n
	return uint64(n), nil
}

// The statements that send buffered writes and sequences: one each for
// every bucket at once.
const (
	putStatement = `INSERT INTO countersign_kv (bucket, key, value)
SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[])
ON CONFLICT (bucket, key) DO UPDATE SET value = EXCLUDED.value`
	deleteStatement = `DELETE FROM countersign_kv d USING unnest($1::text[], $2::bytea[]) AS u(b, k)
WHERE d.bucket = u.b AND d.key = u.k`
	seqStatement = `INSERT INTO countersign_seq (bucket, seq)
SELECT * FROM unnest($1::text[], $2::bigint[])
ON CONFLICT (bucket) DO UPDATE SET seq = EXCLUDED.seq`
)

// queueWrites queues the buffered writes of the buckets (all when buckets
// is nil) on b, in key order, and forgets them; with seqs, the sequences
// too. It reports whether it queued anything.
func (x *tx) queueWrites(b *pgx.Batch, only string, seqs bool) bool {
	var pb, db []string
	var pk, pv, dk [][]byte
	names := make([]string, 0, len(x.puts))
	for name := range x.puts {
		if only == "" || name == only {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		m := x.puts[name]
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if v := m[k]; v == nil {
				db, dk = append(db, name), append(dk, []byte(k))
			} else {
				pb, pk, pv = append(pb, name), append(pk, []byte(k)), append(pv, v)
			}
		}
		delete(x.puts, name)
	}
	queued := false
	if len(pb) > 0 {
		b.Queue(putStatement, pb, pk, pv)
		queued = true
	}
	if len(db) > 0 {
		b.Queue(deleteStatement, db, dk)
		queued = true
	}
	if seqs && len(x.seqs) > 0 {
		var sb []string
		var sn []int64
		for name, n := range x.seqs {
			sb, sn = append(sb, name), append(sn, n)
		}
		b.Queue(seqStatement, sb, sn)
		queued = true
	}
	return queued
}

// queueBegin queues what begins the transaction, if it was not sent yet,
// with the prefetched reads when prefetch is true, and returns what takes
// their results from the batch's results, before those of anything queued
// after them.
func (x *tx) queueBegin(b *pgx.Batch, prefetch bool) (take func(pgx.BatchResults) error) {
	n := len(x.begin)
	for _, q := range x.begin {
		b.Queue(q)
	}
	x.begin = nil
	pre := x.pre
	x.pre = nil
	if !prefetch || pre == nil {
		pre = nil
	} else {
		var kb []string
		var kk [][]byte
		for _, k := range pre.Keys {
			kb, kk = append(kb, k.Bucket), append(kk, k.Key)
		}
		b.Queue(prefetchKeys, kb, kk)
		b.Queue(prefetchSeqs, pre.Sequences)
	}
	return func(br pgx.BatchResults) error {
		for range n {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if pre == nil {
			return nil
		}
		return x.takePrefetch(br, pre)
	}
}

// takePrefetch reads the results of pre's statements into what the
// transaction has seen, and its sequences.
func (x *tx) takePrefetch(br pgx.BatchResults, pre *Prefetch) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	for rows.Next() {
		var b string
		var k, v []byte
		if err := rows.Scan(&b, &k, &v); err != nil {
			rows.Close()
			return err
		}
		if v == nil {
			v = []byte{}
		}
		x.note(b, string(k), v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, k := range pre.Keys {
		if _, ok := x.seen[k.Bucket][string(k.Key)]; !ok {
			x.note(k.Bucket, string(k.Key), nil)
		}
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	if x.seqs == nil {
		x.seqs = map[string]int64{}
	}
	for rows.Next() {
		var b string
		var n int64
		if err := rows.Scan(&b, &n); err != nil {
			rows.Close()
			return err
		}
		if _, ok := x.seqs[b]; !ok {
			x.seqs[b] = n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, b := range pre.Sequences {
		if _, ok := x.seqs[b]; !ok {
			x.seqs[b] = 0 // no row yet: the first number is 1
		}
	}
	return nil
}

// start begins the transaction on the server, with the prefetched reads,
// when no statement of its own is waiting to travel with them.
func (x *tx) start() error {
	if x.began() {
		return nil
	}
	b := &pgx.Batch{}
	take := x.queueBegin(b, true)
	br := x.q.SendBatch(x.ctx, b)
	err := take(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// began reports whether the transaction was begun on the server.
func (x *tx) began() bool { return len(x.begin) == 0 }

// flush sends the buffered writes of bucket before a scan of it; what they
// wrote is then what the transaction has seen of those keys.
func (x *tx) flush(bucket string) error {
	if len(x.puts[bucket]) == 0 {
		return nil
	}
	for k, v := range x.puts[bucket] {
		x.note(bucket, k, v)
	}
	b := &pgx.Batch{}
	take := x.queueBegin(b, true)
	x.queueWrites(b, bucket, false)
	br := x.q.SendBatch(x.ctx, b)
	err := take(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
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
	if err := x.flush(bucket); err != nil {
		return err
	}
	lo, op := from, ">=" // op is > once lo is the last key of the previous batch
	if lo == nil {
		lo = []byte{}
	}
	for n := firstBatch; ; n = min(n*4, maxBatch) {
		rows, err := x.batch(scanQuery(op, to != nil, "ASC"), bucket, lo, to, n)
		if err != nil {
			return err
		}
		if n == firstBatch && len(rows) < n {
			x.noteWhole(bucket, lo, to, rows)
		}
		if done, err := feed(rows, n, fn); done || err != nil {
			return err
		}
		lo, op = rows[len(rows)-1][0], ">"
	}
}

func (x *tx) Descend(bucket string, from, to []byte, fn func(k, v []byte) error) error {
	if err := x.flush(bucket); err != nil {
		return err
	}
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
		if n == firstBatch && len(rows) < n {
			x.noteWhole(bucket, lo, to, rows)
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
	var out [][2][]byte
	err := x.read(func(rows pgx.Rows) error {
		for rows.Next() {
			var k, v []byte
			if err := rows.Scan(&k, &v); err != nil {
				return err
			}
			if v == nil {
				v = []byte{}
			}
			out = append(out, [2][]byte{k, v})
		}
		return nil
	}, q, args...)
	return out, err
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
