package main

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/adapters/mcp"
	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/adapters/postgres"
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
	a.upstreams = mcp.NewUpstreams(a.bot, gw, a.runsAlive(), a.log)
	a.closers = append(a.closers, gw.Close)
	a.bot.OnSweep("gateway_results", a.upstreams.SweepResults)
	// A run that stopped while others keep serving (a replica killed
	// mid-call) has its forwarding markers reported by the sweep, which
	// the leader runs: each replica's own markers, and those of runs
	// still alive, are left alone.
	a.bot.OnSweep("gateway_forwarding", a.upstreams.SweepForwarding)
	// Each replica supervises the upstreams it started itself.
	a.runners = append(a.runners, runner{name: "gateway", run: gw.Run, everyReplica: true})
	return nil
}

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
	if _, err := a.upstreams.Recover(ctx); err != nil {
		return fmt.Errorf("gateway: reading the calls the last run left forwarding: %w", err)
	}
	if err := a.gateway.Connect(ctx); err != nil {
		return err
	}
	a.log.Info("gateway: upstreams started", "tools", len(a.gateway.Tools()), "down", a.gateway.DownNames())
	return nil
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

// setRun records the id of this serving run (the read audit's claim) for
// the gateway's forwarding markers (mcp.Upstreams.SetRun).
func (a *app) setRun(id string) {
	if a.upstreams != nil {
		a.upstreams.SetRun(id)
	}
}

// degraded names the upstreams down now, for /readyz.
func (a *app) degraded() func() []string {
	if a.gateway == nil {
		return nil
	}
	return a.gateway.DownNames
}
