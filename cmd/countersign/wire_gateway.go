package main

import (
	"context"

	"github.com/countersign/countersign/adapters/mcp"
	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/bot"
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
	var p problems
	ups := g.upstreams(a.getenv, &p) // config_gateway.go
	if err := p.err(); err != nil {
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
	a.runners = append(a.runners, runner{name: "gateway", run: gw.Run})
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
	if err := a.gateway.Connect(ctx); err != nil {
		return err
	}
	a.log.Info("gateway: upstreams started", "tools", len(a.gateway.Tools()), "down", a.gateway.DownNames())
	return nil
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

// degraded names the upstreams down now, for /readyz.
func (a *app) degraded() func() []string {
	if a.gateway == nil {
		return nil
	}
	return a.gateway.DownNames
}
