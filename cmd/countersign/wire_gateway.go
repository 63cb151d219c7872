package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/countersign/countersign/adapters/mcp"
	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/adapters/postgres"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// wireGateway makes the gateway of gateway.upstreams, for the MCP
// endpoints to serve (wireAdmin, cmdMCP). connectGateway starts the
// upstreams once every tool is registered; the "gateway" runner keeps
// them running.
func (a *app) wireGateway(context.Context) error {
	g := a.cfg.Gateway
	if len(g.Upstreams) == 0 {
		return nil
	}
	ups, err := g.ResolvedUpstreams(a.getenv)
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Options{
		Upstreams: ups, Logger: a.log.With("component", "gateway"), Version: version,
		CallTimeout: g.CallTimeout, MaxResultBytes: g.MaxResultBytes, Now: a.bot.Now,
		Reserved: func(name string) bool {
			for _, t := range a.bot.Tools() {
				if t.Name == name {
					return true
				}
			}
			return false
		},
	})
	if err != nil {
		return err
	}
	a.gateway = gw
	a.closers = append(a.closers, gw.Close)
	// The upstream answers kept for retries (adapters/mcp/forwarding.go)
	// outlive any requestState (5 minutes) by far after a day.
	a.bot.OnSweep("gateway_results", func(ctx context.Context, now time.Time) (int, error) {
		return mcp.PruneResults(ctx, a.bot.Store(), now.Add(-resultsKept))
	})
	// A run that stopped while others keep serving (a replica killed
	// mid-call) has its forwarding markers reported by the sweep, which
	// the leader runs: each replica's own markers, and those of runs
	// still alive, are left alone.
	a.bot.OnSweep("gateway_forwarding", func(ctx context.Context, now time.Time) (int, error) {
		rec := a.recovery(a.runID())
		if rec.Self == "" && rec.Alive == nil {
			// One process, not serving (yet): the start reported the past
			// runs' markers, and no other can tell this run's from theirs.
			return 0, nil
		}
		n, err := mcp.RecoverForwarding(ctx, a.bot.Store(), rec, a.reportUnknown)
		if n > 0 {
			a.log.Error("gateway: a run stopped while forwarding approved calls; their outcome is unknown (audited gateway_outcome_unknown), and they are not run again", "count", n)
		}
		return n, err
	})
	// Each replica supervises the upstreams it started itself.
	a.runners = append(a.runners, runner{name: "gateway", run: gw.Run, everyReplica: true})
	return nil
}

// resultsKept is how long an upstream's answer is kept for a retry.
const resultsKept = 24 * time.Hour

// connectGateway starts every upstream and lists its tools; a tool served
// under one of Countersign's names stops the start. An upstream that does
// not start is served down (its tools answer so, /readyz names it) and
// retried with backoff.
func (a *app) connectGateway(ctx context.Context) error {
	if a.gateway == nil {
		return nil
	}
	// What runs that stopped left forwarding: outcome unknown, never
	// re-run. This run has forwarded nothing yet; other live replicas'
	// calls in flight are left alone.
	if n, err := mcp.RecoverForwarding(ctx, a.bot.Store(), a.recovery(""), a.reportUnknown); err != nil {
		return fmt.Errorf("gateway: reading the calls the last run left forwarding: %w", err)
	} else if n > 0 {
		a.log.Error("gateway: the last run stopped while forwarding approved calls; their outcome is unknown (audited gateway_outcome_unknown), and they are not run again", "count", n)
	}
	if err := a.gateway.Connect(ctx); err != nil {
		return err
	}
	a.log.Info("gateway: upstreams started", "tools", len(a.gateway.Tools()), "down", a.gateway.DownNames())
	return nil
}

// reportUnknown audits request id as gateway_outcome_unknown and notes it
// on the request's cards, in the transaction that drops its marker.
func (a *app) reportUnknown(ctx context.Context, caller *bot.Caller, id, detail, note string, drop func(kv.Tx) error) error {
	item, err := a.bot.Items().OfRequest(ctx, id)
	if err != nil {
		return err
	}
	return a.bot.Chat().AuditNote(ctx, caller, bot.Space{UserID: "default"}, "gateway_outcome_unknown", detail, item, note, drop)
}

// recovery says whose forwarding markers are reported: not self's, and on
// PostgreSQL only those of runs whose claim is no longer held.
func (a *app) recovery(self string) mcp.Recovery {
	return mcp.Recovery{Self: self, Alive: a.runsAlive(), StaleAfter: mcp.StaleAfter(a.gateway), Now: a.bot.Now}
}

// runsAlive tells whether another serving run is alive: on PostgreSQL,
// the run claims of the read audit (bot.Runs); nil on bbolt, which one
// process owns.
func (a *app) runsAlive() mcp.AliveFunc {
	if pg, ok := a.db.(*postgres.DB); ok {
		return pg.Runs().Alive
	}
	return nil
}

// setRun records the id of this serving run (the read audit's claim), or,
// without claims (bbolt), a random one, for the forwarding markers.
func (a *app) setRun(id string) {
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = "local-" + hex.EncodeToString(b[:])
	}
	a.run.Store(&id)
}

// runID is this serving run's id; "" before it serves.
func (a *app) runID() string {
	if p := a.run.Load(); p != nil {
		return *p
	}
	return ""
}

// gatewayAudit records what the gateway does outside a tool call, under
// the default space.
func (a *app) gatewayAudit() mcp.AuditFunc {
	if a.gateway == nil {
		return nil
	}
	return func(ctx context.Context, caller *bot.Caller, action, detail string) error {
		return a.bot.Chat().Audit(ctx, caller, bot.Space{UserID: "default"}, action, detail)
	}
}

// gatewayAuditRead records a read-only call passed through, as read
// verdicts are (audit.read_verdicts: queued, or durable).
func (a *app) gatewayAuditRead() mcp.AuditFunc {
	if a.gateway == nil {
		return nil
	}
	return func(ctx context.Context, caller *bot.Caller, action, detail string) error {
		return a.bot.Chat().AuditRead(ctx, caller, bot.Space{UserID: "default"}, action, detail)
	}
}

// gatewayStore keeps the gateway's forwarding markers.
func (a *app) gatewayStore() kv.Store {
	if a.gateway == nil {
		return nil
	}
	return a.bot.Store()
}

// degraded names the upstreams down now, for /readyz.
func (a *app) degraded() func() []string {
	if a.gateway == nil {
		return nil
	}
	return a.gateway.DownNames
}
