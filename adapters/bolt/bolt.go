// Package bolt implements the kv contract on a bbolt file.
//
// Every Update commits with bbolt's two fsyncs before it returns, so a nil
// error means the write is on disk. Buckets are created on first write; a
// read of a bucket that does not exist yet sees it empty.
//
// A commit that fails (a failed write or fsync, a full disk) fails its
// callers and then the whole store: every later Update and View returns an
// error wrapping ErrFailed. After a failed fsync the kernel may already have
// dropped the dirty pages, so retrying on the same handle could acknowledge
// a write that is not on disk (PostgreSQL's "fsyncgate"); the only safe
// recovery is to stop and reopen the file, which Err lets the process see.
package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/kv"
	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"
)

// ErrLocked is returned by Open when another process holds the file.
var ErrLocked = errors.New("the store is locked by another process")

// ErrFailed is wrapped by every error of a store whose commit has failed.
var ErrFailed = errors.New("the store stopped after a failed write")

// DB is an open bbolt store.
type DB struct {
	db       *bbolt.DB
	path     string
	group    *kv.Committer // nil unless Options.GroupCommit
	failSync func() error
	// sequential are the buckets filled to SequentialFill (Options.Sequential).
	sequential map[string]bool
	failed     atomic.Pointer[error] // the first commit failure, once the store has failed
	close      sync.Once
	closeErr   error
}

var _ kv.Store = (*DB)(nil)

// Options tunes Open. The zero value is the safe default.
type Options struct {
	// LockTimeout is how long Open waits for another process to release the
	// file before it fails with ErrLocked. Zero means one second.
	LockTimeout time.Duration
	// ReadOnly opens the file without taking the writer lock.
	ReadOnly bool
	// GroupCommit merges concurrent Updates into one durable commit (see
	// kv.Committer for its rules). Every Update function must then be safe
	// to run twice, which kv.Store requires anyway.
	GroupCommit bool
	// NoFreelistSync keeps bbolt's freelist in memory only (map freelist)
	// instead of writing it with every commit (array freelist, the
	// default). Open then rebuilds it by scanning every page of the file,
	// about 0.6 s per GiB, instead of reading it: a slower start, for one
	// page less written per commit (many less in a heavily fragmented file,
	// whose freelist is large). Every commit is durable either way, and a
	// file written in one mode opens in the other (the first open that
	// syncs scans once, then writes the freelist).
	NoFreelistSync bool
	// Sequential names the buckets whose new keys mostly sort after every
	// key already there (sequence numbers: the audit chain, facts by id).
	// Their pages are filled to SequentialFill when they split, instead of
	// bbolt's 50%, which would leave every page of an append-only bucket
	// half empty for ever. Buckets with random keys keep 50%.
	Sequential []string
	// FailSync, when set, is called where each commit would make its write
	// durable; a non-nil error fails that commit as a failed fsync or a full
	// disk would (the transaction is rolled back and the store fails). It
	// exists for fault-injection tests and is never set in production.
	FailSync func() error
}

// Open opens (creating if needed) the bbolt file at path with mode 0600.
func Open(path string, opt Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("store path is empty")
	}
	if dir := filepath.Dir(path); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("store directory %s: %w", dir, err)
		}
	}
	timeout := opt.LockTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	bo := &bbolt.Options{
		Timeout:  timeout,
		ReadOnly: opt.ReadOnly,
		// A synced freelist is written as an array: the map type is the
		// slow one to write (perf-targets.md §1.3).
		FreelistType: bbolt.FreelistArrayType,
	}
	if opt.NoFreelistSync {
		bo.FreelistType, bo.NoFreelistSync = bbolt.FreelistMapType, true
	}
	db, err := bbolt.Open(path, 0o600, bo)
	if err != nil {
		if errors.Is(err, bberrors.ErrTimeout) {
			return nil, fmt.Errorf("open %s: %w (is a countersign server running with this store? stop it first, or point --config at another store.path)", path, ErrLocked)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d := &DB{db: db, path: path, failSync: opt.FailSync}
	if len(opt.Sequential) > 0 {
		d.sequential = map[string]bool{}
		for _, b := range opt.Sequential {
			d.sequential[b] = true
		}
	}
	if opt.GroupCommit && !opt.ReadOnly {
		d.group = kv.NewCommitter(d.attempt, nil)
	}
	return d, nil
}

// Path returns the file the store was opened from.
func (d *DB) Path() string { return d.path }

// Close closes the file. It waits for open transactions to finish; a second
// Close does nothing.
func (d *DB) Close() error {
	d.close.Do(func() {
		if d.group != nil {
			d.group.Close()
		}
		d.closeErr = d.db.Close()
	})
	return d.closeErr
}

// Err returns nil while the store works, and an error wrapping ErrFailed
// once a commit has failed. The process should then stop: nothing can be
// acknowledged on this handle any more, and a restart reopens the file at
// its last good commit.
func (d *DB) Err() error {
	if p := d.failed.Load(); p != nil {
		return fmt.Errorf("%w: %w; restart Countersign once the disk is healthy (nothing was acknowledged after this error)", ErrFailed, *p)
	}
	return nil
}

// fail records the first commit failure; from then on the store refuses
// every call.
func (d *DB) fail(err error) {
	d.failed.CompareAndSwap(nil, &err)
}

// Update runs fn in a read-write transaction and commits it durably.
func (d *DB) Update(ctx context.Context, fn func(kv.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.Err(); err != nil {
		return err
	}
	if d.group != nil {
		return d.group.Update(ctx, fn)
	}
	return d.commit(func(t *bbolt.Tx, h *kv.Hooks) error { return fn(&tx{t: t, hooks: h, sequential: d.sequential}) })
}

// attempt is the group committer's kv.Attempt: one bbolt transaction of a
// store that has not failed (once it has, every function of the group gets
// its error).
func (d *DB) attempt(run func(kv.Tx) error) error {
	if err := d.Err(); err != nil {
		return err
	}
	return d.commit(func(t *bbolt.Tx, h *kv.Hooks) error {
		return run(&tx{t: t, hooks: h, sequential: d.sequential})
	})
}

// commit runs fn in one bbolt transaction, then the PreCommits registered in
// it (kv.Finisher), and commits it. An error of fn or of a PreCommit rolls
// it back and is returned as it is; any other failure (the commit's writes
// or fsyncs, or the FailSync hook) fails the store.
func (d *DB) commit(fn func(*bbolt.Tx, *kv.Hooks) error) error {
	var ran bool
	var fnErr error
	err := d.db.Update(func(t *bbolt.Tx) error {
		ran = true
		h := &kv.Hooks{}
		if fnErr = fn(t, h); fnErr != nil {
			return fnErr
		}
		if fnErr = runHooks(h, t, d.sequential); fnErr != nil {
			return fnErr
		}
		if d.failSync != nil {
			return d.failSync()
		}
		return nil
	})
	if err != nil && ran && fnErr == nil {
		d.fail(err)
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	return err
}

// View runs fn in a read-only transaction.
func (d *DB) View(ctx context.Context, fn func(kv.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.Err(); err != nil {
		return err
	}
	return d.db.View(func(t *bbolt.Tx) error { return fn(&tx{t: t}) })
}

// Check runs bbolt's consistency check and returns every problem found.
func (d *DB) Check() error {
	return d.db.View(func(t *bbolt.Tx) error {
		var errs []error
		for err := range t.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}

// SequentialFill is how full Options.Sequential buckets' pages are left
// when they split.
const SequentialFill = 0.95

// tx is a kv.Tx on a bbolt transaction. hooks is nil in a read-only one.
type tx struct {
	t          *bbolt.Tx
	hooks      *kv.Hooks
	sequential map[string]bool
}

func (x *tx) bucket(name string, create bool) (*bbolt.Bucket, error) {
	b := x.t.Bucket([]byte(name))
	if b == nil {
		if !create {
			return nil, nil
		}
		var err error
		if b, err = x.t.CreateBucketIfNotExists([]byte(name)); err != nil {
			return nil, err
		}
	}
	if create && x.sequential[name] {
		// FillPercent belongs to the transaction's handle of the bucket,
		// which bbolt keeps for the transaction; it applies at commit.
		b.FillPercent = SequentialFill
	}
	return b, nil
}

func (x *tx) Get(bucket string, key []byte) ([]byte, error) {
	b, err := x.bucket(bucket, false)
	if err != nil || b == nil {
		return nil, err
	}
	v := b.Get(key)
	if v == nil {
		return nil, nil
	}
	return bytes.Clone(v), nil
}

func (x *tx) Put(bucket string, key, value []byte) error {
	b, err := x.bucket(bucket, true)
	if err != nil {
		return err
	}
	return b.Put(key, value)
}

func (x *tx) Delete(bucket string, key []byte) error {
	b, err := x.bucket(bucket, false)
	if err != nil || b == nil {
		return err
	}
	return b.Delete(key)
}

func (x *tx) NextSequence(bucket string) (uint64, error) {
	b, err := x.bucket(bucket, true)
	if err != nil {
		return 0, err
	}
	return b.NextSequence()
}

func (x *tx) Ascend(bucket string, from, to []byte, fn func(k, v []byte) error) error {
	b, err := x.bucket(bucket, false)
	if err != nil || b == nil {
		return err
	}
	c := b.Cursor()
	var k, v []byte
	if from == nil {
		k, v = c.First()
	} else {
		k, v = c.Seek(from)
	}
	for ; k != nil; k, v = c.Next() {
		if to != nil && bytes.Compare(k, to) >= 0 {
			return nil
		}
		if err := fn(k, v); err != nil {
			if errors.Is(err, kv.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (x *tx) Descend(bucket string, from, to []byte, fn func(k, v []byte) error) error {
	b, err := x.bucket(bucket, false)
	if err != nil || b == nil {
		return err
	}
	c := b.Cursor()
	var k, v []byte
	switch {
	case to == nil:
		k, v = c.Last()
	default:
		// Seek lands on the first key >= to, which is excluded: step back
		// from it, or start at the last key when every key is below to.
		if sk, _ := c.Seek(to); sk == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	for ; k != nil; k, v = c.Prev() {
		if from != nil && bytes.Compare(k, from) < 0 {
			return nil
		}
		if err := fn(k, v); err != nil {
			if errors.Is(err, kv.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}
