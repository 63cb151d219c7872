package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen delivers the keys of committed writes to the watched buckets
// (Options.Watch) to fn, from every replica, until ctx ends. It holds one
// connection of the pool; when that connection is lost it reconnects after
// retry, and then calls fn(bucket, nil) for every bucket, since wake-ups
// may have been missed meanwhile. fn runs on Listen's goroutine and must
// not block.
func (d *DB) Listen(ctx context.Context, buckets []string, retry time.Duration, fn func(bucket string, key []byte)) error {
	first := true
	for {
		err := d.listenOnce(ctx, buckets, func() {
			if !first {
				for _, b := range buckets {
					fn(b, nil)
				}
			}
			first = false
		}, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = err // the connection was lost: reconnect
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retry):
		}
	}
}

func (d *DB) listenOnce(ctx context.Context, buckets []string, listening func(), fn func(string, []byte)) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection that has listened is not handed back to the pool.
	defer func() {
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}()
	for _, b := range buckets {
		if _, err := conn.Exec(ctx, `LISTEN "countersign_`+b+`"`); err != nil {
			return err
		}
	}
	listening()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		bucket := strings.TrimPrefix(n.Channel, "countersign_")
		key, err := hex.DecodeString(n.Payload)
		if err != nil {
			continue
		}
		fn(bucket, key)
	}
}

// Lead runs fn while this process holds the advisory lock key, which one
// session of the database holds at a time: the leader among replicas. A
// replica that is not the leader tries again every interval; the leader
// checks its session every interval and, once the session is lost (and with
// it the lock, which may then pass to another replica), cancels fn's
// context and waits for it before trying again. A replica that dies loses
// the lock with its connection, so another leads within an interval or two.
// Lead returns when ctx ends, or with fn's error when fn fails while
// leading (its context not cancelled).
func (d *DB) Lead(ctx context.Context, key int64, interval time.Duration, fn func(ctx context.Context) error) error {
	for {
		err := d.leadOnce(ctx, key, interval, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, errLost) && !isConnErr(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// errLost ends a term of leadership whose session was lost.
var errLost = errors.New("postgres: leadership lost")

func (d *DB) leadOnce(ctx context.Context, key int64, interval time.Duration, fn func(context.Context) error) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The session's lock must die with it: never hand it back to the pool.
	defer func() {
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}()
	for {
		var got bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
			return err
		}
		if got {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return lead(ctx, conn, interval, fn)
}

// lead runs fn while conn's session is alive.
func lead(ctx context.Context, conn *pgxpool.Conn, interval time.Duration, fn func(context.Context) error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(lctx) }()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			cancel()
			<-done
			return ctx.Err()
		case <-t.C:
			// A lost session fails the ping at once (the server closed
			// it); the timeout only covers a database that stopped
			// answering. It is longer than the interval so that a slow
			// answer on a loaded machine does not hand leadership over
			// while the session, and with it the lock, is still alive.
			pctx, pcancel := context.WithTimeout(ctx, max(5*interval, 2*time.Second))
			err := conn.Ping(pctx)
			pcancel()
			if err != nil && ctx.Err() == nil {
				cancel()
				<-done
				return errLost
			}
		}
	}
}
