package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// runClass is the first key of the two-key advisory locks that mark a
// serving run alive ("CSRu"); the second is the run's id.
const runClass int32 = 0x43535275

// Runs claims serving runs on the database: each run (a replica's serve,
// a `countersign mcp`) holds a session advisory lock of its own for as
// long as it runs, so that another run can tell a replica that is alive
// from one that died (bot.Runs).
type Runs struct {
	d *DB
	// Interval is how often a claim's session is checked and, once lost
	// (a database restart), taken again. Zero means 1 s.
	Interval time.Duration
}

// Runs returns the run claims of d.
func (d *DB) Runs() *Runs { return &Runs{d: d} }

// Claim takes a new run id and holds its lock on a connection of its own
// until release is called (or the process dies, and the session with it).
// When the session is lost the lock is taken again on a new one.
func (r *Runs) Claim(ctx context.Context) (string, func(), error) {
	interval := r.Interval
	if interval <= 0 {
		interval = time.Second
	}
	for tries := 0; ; tries++ {
		id := rand.Int32N(1<<31-1) + 1
		conn, got, err := r.lock(ctx, id)
		if err != nil {
			return "", nil, classify(err)
		}
		if !got {
			if tries > 10 {
				return "", nil, errors.New("postgres: no free run id after 10 tries")
			}
			continue
		}
		hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		go func() {
			select {
			case <-r.d.closing: // the store closes: give the connection back
				cancel()
			case <-hctx.Done():
			}
		}()
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.hold(hctx, conn, id, interval)
		}()
		return strconv.Itoa(int(id)), func() { cancel(); <-done }, nil
	}
}

// lock tries the run lock id on a new connection, which it returns when it
// got the lock (nil otherwise).
func (r *Runs) lock(ctx context.Context, id int32) (*pgxpool.Conn, bool, error) {
	conn, err := r.d.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	var got bool
	err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, runClass, id).Scan(&got)
	if err != nil || !got {
		// The session's locks must die with it: never hand it back.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
		return nil, false, err
	}
	return conn, true, nil
}

// hold keeps the lock on conn until ctx ends, taking it again on a new
// session whenever the old one is lost.
func (r *Runs) hold(ctx context.Context, conn *pgxpool.Conn, id int32, interval time.Duration) {
	drop := func() {
		if conn != nil {
			if ctx.Err() != nil {
				// Released: unlock first, so that the run is not alive the
				// moment release returns (closing alone ends the session
				// a little later).
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				_, _ = conn.Exec(uctx, `SELECT pg_advisory_unlock($1, $2)`, runClass, id)
				cancel()
			}
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
			conn.Release()
			conn = nil
		}
	}
	defer drop()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if conn != nil {
			pctx, cancel := context.WithTimeout(ctx, max(5*interval, 2*time.Second))
			err := conn.Ping(pctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
			drop()
		}
		c, got, err := r.lock(ctx, id)
		if err == nil && got {
			conn = c
		}
	}
}

// Alive reports whether the run id holds its lock (on any session of this
// database).
func (r *Runs) Alive(ctx context.Context, id string) (bool, error) {
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil {
		return false, nil // not an id this package hands out: no run holds it
	}
	var alive bool
	err = r.d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
	WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()
	AND l.classid::bigint = $1 AND l.objid::bigint = $2 AND l.objsubid = 2)`, int64(runClass), n).Scan(&alive)
	if err != nil {
		return false, classify(err)
	}
	return alive, nil
}
