package main

import (
	"context"
	"os"
	"time"

	"github.com/countersign/countersign/adapters/postgres"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
)

// Several replicas on one PostgreSQL database (docs/operations.md, "Running
// several replicas"). Every replica serves HTTP, MCP and the chat platforms'
// HTTP callbacks, and decides the clicks it acknowledged on its own click
// workers; one of them, the leader, also runs every other background loop:
// the sweeper, the outbox workers (chat posts and updates, callbacks) and
// the chat connections (Slack Socket Mode, the Discord gateway). So a
// request expires once, each event is delivered by one replica, and one
// connection receives each chat event. Leadership is a PostgreSQL advisory
// lock held by one session; when the leader dies its session ends, and
// another replica takes the lock within leaderInterval.

// leaderLock is the advisory lock key of the leader ("CountrsL").
const leaderLock int64 = 0x436f756e7472734c

// leaderInterval is how often a follower tries to lead and the leader
// checks its session.
const leaderInterval = time.Second

// Buckets whose committed writes every replica hears (LISTEN/NOTIFY):
// approvals' requests (a decision wakes the long polls waiting on it on
// every replica) and bot's outbox (a new event wakes the leader's workers).
const (
	requestsBucket = approvals.RequestsBucket
	outboxBucket   = bot.OutboxBucket
)

// watchedBuckets are passed to every replica's store.
var watchedBuckets = []string{requestsBucket, outboxBucket}

// shareWithReplicas, on PostgreSQL, puts every background loop under
// leadership and adds the listener of other replicas' writes.
func (a *app) shareWithReplicas() {
	pg, ok := a.db.(*postgres.DB)
	if !ok {
		return
	}
	var loops, everywhere []runner
	for _, r := range a.runners {
		if r.everyReplica {
			everywhere = append(everywhere, r)
		} else {
			loops = append(loops, r)
		}
	}
	a.runners = []runner{
		{name: "leader", run: func(ctx context.Context) error {
			return pg.Lead(ctx, leaderLock, leaderInterval, func(ctx context.Context) error {
				a.log.Info("replicas: this replica leads (sweeper, outbox, chat connections)")
				err := runAll(ctx, loops)
				a.log.Info("replicas: this replica no longer leads", "err", err)
				return err
			})
		}},
		{name: "replica wake-ups", run: func(ctx context.Context) error {
			return pg.Listen(ctx, watchedBuckets, leaderInterval, a.onReplicaWrite)
		}},
	}
	a.runners = append(a.runners, everywhere...)
	a.runners = append(a.runners, a.replicaRunners...)
}

// readAuditOptions are the run's audit of read verdicts (audit:); on
// PostgreSQL each run claims itself on the database, so that its running
// marker is its own and a replica that starts while others run does not
// report them as stopped uncleanly (bot.Runs).
func (a *app) readAuditOptions() bot.ReadAuditOptions {
	o := a.cfg.Audit.ReadAudit()
	if pg, ok := a.db.(*postgres.DB); ok {
		o.Runs = pg.Runs()
		o.Host, _ = os.Hostname()
	}
	return o
}

// onReplicaWrite is told of every committed write to a watched bucket, by
// any replica (key nil: writes may have been missed while reconnecting).
func (a *app) onReplicaWrite(bucket string, key []byte) {
	switch bucket {
	case requestsBucket:
		if key != nil && a.wakeStatus != nil {
			a.wakeStatus(string(key))
		}
	case outboxBucket:
		a.bot.Outbox().Wake()
	}
}

// runAll runs loops until ctx ends, and returns at once with the first
// error of one (the others cancelled). A loop that returns nil early (a
// one-off task) leaves the others running.
func runAll(ctx context.Context, loops []runner) error {
	errc := make(chan error, len(loops))
	stop := startRunners(ctx, loops, func(err error) { errc <- err })
	defer stop()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
