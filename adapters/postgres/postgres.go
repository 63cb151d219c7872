// Package postgres implements the kv contract on PostgreSQL, so that several
// Countersign replicas can share one database.
//
// Every bucket lives in one table, countersign_kv (bucket, key, value), keys
// and values as bytea, whose ordering is bytewise like bbolt's; sequences
// live in countersign_seq. Open creates and migrates the schema under an
// advisory lock, so replicas that start together migrate once.
//
// Update runs in a SERIALIZABLE transaction and returns nil only after
// PostgreSQL has committed it. A serialization failure or a deadlock rolls
// the transaction back and runs it again (kv.Store: the function may run
// more than once). With Options.GroupCommit, concurrent Updates of one
// process share a transaction, under the rules of the bbolt engine's group
// commit. View runs in a REPEATABLE READ, READ ONLY transaction: one
// consistent snapshot.
//
// While the database cannot be reached, every call fails with an error
// wrapping kv.ErrUnavailable, and nothing is acknowledged; the store
// recovers by itself when the database comes back (the pool reconnects).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options tunes Open. The zero value is a usable default.
type Options struct {
	// MaxConns bounds the pool. Zero means 10.
	MaxConns int32
	// StatementTimeout bounds every statement on the server
	// (statement_timeout); zero means 5 s, a negative value none.
	StatementTimeout time.Duration
	// ConnectTimeout bounds a new connection. Zero means 5 s.
	ConnectTimeout time.Duration
	// GroupCommit merges concurrent Updates of this process into one
	// transaction (see kv.Committer). Every Update function must then be safe
	// to run again, which kv.Store requires anyway.
	GroupCommit bool
	// Watch names the buckets whose committed writes are announced on
	// channel countersign_<bucket> (see Listen). Every replica of one
	// database must pass the same list.
	Watch []string
	// MaxAttempts bounds how often one transaction is run after
	// serialization failures, deadlocks and lost connections before Update
	// gives up with kv.ErrUnavailable. Zero means 30.
	MaxAttempts int
	// Prefetch is read by every write transaction in the round trip that
	// begins it (see Prefetch). The zero value reads nothing ahead.
	Prefetch Prefetch
}

// DB is a kv.Store on a PostgreSQL database.
type DB struct {
	pool     *pgxpool.Pool
	group    *kv.Committer
	attempts int
	// attemptTimeout bounds one run of a transaction on the client's side.
	attemptTimeout time.Duration
	close          sync.Once
	stats          *counter
	// prefetch is Options.Prefetch, nil when it names nothing.
	prefetch *Prefetch
	// closing is closed when Close begins: what holds a connection for
	// good (a run's claim) gives it back then.
	closing chan struct{}
}

var _ kv.Store = (*DB)(nil)

// Open connects to the database named by dsn (a postgres:// URL or a
// key=value DSN), migrates the schema and returns the store. The dsn is
// never part of an error: it may hold a password.
func Open(ctx context.Context, dsn string, opt Options) (*DB, error) {
	if dsn == "" {
		return nil, errors.New("postgres: the DSN is empty")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("postgres: the DSN does not parse as a postgres:// URL or a key=value DSN")
	}
	cfg.MaxConns = opt.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 10
	}
	ct := opt.ConnectTimeout
	if ct <= 0 {
		ct = 5 * time.Second
	}
	cfg.ConnConfig.ConnectTimeout = ct
	st := opt.StatementTimeout
	if st == 0 {
		st = 5 * time.Second
	}
	if st > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(st.Milliseconds(), 10)
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "countersign"
	}
	stats := &counter{}
	cfg.ConnConfig.Tracer = stats
	// Retrying a statement (not a transaction) is never done by pgx; every
	// retry here re-runs whole transactions.
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", unavailable(err))
	}
	d := &DB{pool: pool, attempts: opt.MaxAttempts, attemptTimeout: 2*max(st, 5*time.Second) + ct, closing: make(chan struct{}), stats: stats}
	if d.attempts <= 0 {
		d.attempts = 30
	}
	if len(opt.Prefetch.Keys) > 0 || len(opt.Prefetch.Sequences) > 0 {
		d.prefetch = &Prefetch{Keys: slices.Clone(opt.Prefetch.Keys), Sequences: slices.Clone(opt.Prefetch.Sequences)}
	}
	if err := migrate(ctx, pool, opt.Watch); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrate the schema: %w", classify(err))
	}
	if opt.GroupCommit {
		d.group = kv.NewCommitter(d.groupAttempt, func(err error) bool { return !isFnErr(err) })
	}
	return d, nil
}

// Pool returns the connection pool, for the features of a replicated
// deployment that need PostgreSQL itself (advisory locks, LISTEN/NOTIFY).
func (d *DB) Pool() *pgxpool.Pool { return d.pool }

// Close stops the committer and closes the pool. A second Close does
// nothing.
func (d *DB) Close() error {
	d.close.Do(func() {
		close(d.closing)
		if d.group != nil {
			d.group.Close()
		}
		d.pool.Close()
	})
	return nil
}

// Ping checks that the database answers.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: %w", unavailable(err))
	}
	return nil
}

// Update runs fn in a serializable transaction and returns once it has
// committed; see the package documentation for re-runs.
func (d *DB) Update(ctx context.Context, fn func(kv.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.group != nil {
		return d.group.Update(ctx, fn)
	}
	return d.commit(ctx, func(x *tx) error { return fn(x) })
}

// View runs fn in a read-only transaction on one snapshot.
func (d *DB) View(ctx context.Context, fn func(kv.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.retry(ctx, func() error {
		actx, cancel := context.WithTimeout(ctx, d.attemptTimeout)
		defer cancel()
		err := d.view(actx, fn)
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return unavailable(err)
		}
		return err
	})
}

// view runs one try of a read-only transaction. Its BEGIN travels with
// its first statement; a function that reads nothing costs nothing.
func (d *DB) view(actx context.Context, fn func(kv.Tx) error) error {
	d.stats.transactions.Add(1)
	conn, err := d.pool.Acquire(actx)
	if err != nil {
		return err
	}
	x := &tx{ctx: actx, q: conn, begin: []string{"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}}
	ferr := fn(x)
	if !x.began() {
		conn.Release()
		return ferr
	}
	end := "COMMIT"
	if ferr != nil {
		end = "ROLLBACK"
	}
	if _, err := conn.Exec(actx, end); err != nil {
		discard(actx, conn)
		if ferr != nil {
			return ferr
		}
		return err
	}
	conn.Release()
	return ferr
}

// discard closes a connection instead of handing it back to the pool: it
// may be in a transaction or hold the writer's lock, and closing the
// session ends both.
func discard(ctx context.Context, conn *pgxpool.Conn) {
	_ = conn.Conn().Close(context.WithoutCancel(ctx))
	conn.Release()
}

// commit runs fn and the PreCommits it registers in one serializable
// transaction and commits it, again from the start after a serialization
// failure, a deadlock or a connection lost before COMMIT was sent. An error
// of fn or of a PreCommit rolls back and is returned as it is. Each attempt
// is bounded by attemptTimeout, so that a database that stops answering
// (paused, or a network that drops packets) fails the call instead of
// holding it.
func (d *DB) commit(ctx context.Context, fn func(*tx) error) error {
	return d.retry(ctx, func() error {
		actx, cancel := context.WithTimeout(ctx, d.attemptTimeout)
		defer cancel()
		err := d.attempt(actx, fn)
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// The attempt's own deadline: the database did not answer.
			return unavailable(err)
		}
		return err
	})
}

// groupAttempt is the group committer's kv.Attempt. Its transaction
// outlives any one caller's context: a queued write is never abandoned half
// way (statement_timeout and attemptTimeout bound it). A serialization
// failure or a deadlock re-runs the whole group, and it matters here: the
// audit chain makes every write of every replica touch the same rows, so a
// group pays for that once per commit, not once per write.
func (d *DB) groupAttempt(run func(kv.Tx) error) error {
	return d.commit(context.Background(), func(x *tx) error { return run(x) })
}

// beginWrite begins a write transaction. The writer's lock is a lock on
// the table countersign_writer that every write transaction of every
// replica takes first and holds to its COMMIT: write transactions
// therefore run one at a time across the cluster, as on bbolt. LOCK TABLE
// takes no snapshot, so the transaction's snapshot (at its first read)
// is taken after the lock is granted, after the previous writer
// committed: the audit chain's head, which every write moves, never makes
// them conflict and retry. Group commit makes each of them carry many
// writes. (Under SERIALIZABLE the lock is for speed, not for
// correctness: writers that did not take it, such as a replica of an
// older version during a rolling upgrade, conflict and retry instead.)
var beginWrite = []string{"BEGIN ISOLATION LEVEL SERIALIZABLE", "LOCK TABLE countersign_writer IN EXCLUSIVE MODE"}

// attempt runs one try of a write transaction on a connection of its own.
// BEGIN, the writer's lock and the prefetched reads travel with the first
// statement; the writes and COMMIT travel together at the end (tx): a
// transaction costs its reads plus one round trip, and one in all when it
// reads nothing but what is prefetched.
func (d *DB) attempt(actx context.Context, fn func(*tx) error) error {
	d.stats.transactions.Add(1)
	conn, err := d.pool.Acquire(actx)
	if err != nil {
		return err
	}
	x := &tx{ctx: actx, q: conn, begin: beginWrite, pre: d.prefetch, hooks: &kv.Hooks{}}
	err = fn(x)
	if err == nil {
		err = x.hooks.Run(x)
	}
	if err != nil {
		if !x.began() {
			conn.Release()
		} else if _, rerr := conn.Exec(context.WithoutCancel(actx), "ROLLBACK"); rerr != nil {
			discard(actx, conn)
		} else {
			conn.Release()
		}
		return err
	}
	b := &pgx.Batch{}
	take := x.queueBegin(b, false)
	begun := b.Len()
	x.queueWrites(b, "", true)
	b.Queue("COMMIT")
	br := conn.SendBatch(actx, b)
	err = take(br)
	for i := begun; err == nil && i < b.Len(); i++ {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		conn.Release()
		return nil
	}
	discard(actx, conn)
	if retryable(err) || pgconn.SafeToRetry(err) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return err // refused by the server: not committed
	}
	// The COMMIT was sent and no answer came back: it may or may not
	// have happened. Never acknowledge it.
	return &outcomeUnknown{err: err}
}

// outcomeUnknown is a COMMIT whose answer was lost.
type outcomeUnknown struct{ err error }

func (e *outcomeUnknown) Error() string {
	return "the commit's outcome is unknown (the connection was lost during COMMIT): " + e.err.Error()
}
func (e *outcomeUnknown) Unwrap() []error { return []error{kv.ErrUnavailable, e.err} }

// retry runs attempt until it succeeds, fails with an error that is not
// worth retrying, or has run d.attempts times. Errors of the database's
// availability are returned wrapping kv.ErrUnavailable.
func (d *DB) retry(ctx context.Context, attempt func() error) error {
	var err error
	for i := 0; i < d.attempts; i++ {
		err = attempt()
		if err == nil {
			return nil
		}
		var oe *outcomeUnknown
		if errors.As(err, &oe) {
			return err
		}
		if !retryable(err) && !(pgconn.SafeToRetry(err) && i < 2) {
			return classify(err)
		}
		// Back off a little, with jitter, so that conflicting writers do
		// not meet again at once.
		wait := time.Duration(rand.Int64N(int64(time.Millisecond)<<min(i, 6))) + 100*time.Microsecond
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			if isFnErr(err) {
				return err
			}
			return fmt.Errorf("%w: %w", kv.ErrUnavailable, ctx.Err())
		}
	}
	return fmt.Errorf("%w: gave up after %d attempts: %w", kv.ErrUnavailable, d.attempts, err)
}

// isFnErr reports whether err is not the database's (a function's error).
func isFnErr(err error) bool {
	var pe *pgconn.PgError
	return !errors.As(err, &pe) && !isConnErr(err)
}

// retryable reports a serialization failure or a deadlock: the transaction
// was rolled back and running it again may succeed.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	return false
}

// isConnErr reports an error of reaching the database rather than of a
// statement: a lost or refused connection, a timeout, a server going away.
func isConnErr(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case len(pe.Code) >= 2 && pe.Code[:2] == "08": // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // shutdown, crash, cannot connect now
			return true
		case pe.Code == "53300", pe.Code == "53100", pe.Code == "53200": // too many connections, disk full, out of memory
			return true
		case pe.Code == "57014", pe.Code == "55P03": // statement timeout, lock not available
			return true
		case pe.Code == "25006": // read-only transaction: a standby promoted or a failover under way
			return true
		}
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	return errors.Is(err, pgx.ErrTxClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isNetErr(err)
}

// classify wraps errors of the database's availability with
// kv.ErrUnavailable and returns every other error as it is.
func classify(err error) error {
	if err == nil || errors.Is(err, kv.ErrUnavailable) {
		return err
	}
	if isConnErr(err) || retryable(err) {
		return unavailable(err)
	}
	return err
}

func unavailable(err error) error {
	if errors.Is(err, kv.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", kv.ErrUnavailable, err)
}
