package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// Upstreams is a gateway as the MCP endpoints serve it (Options.Upstreams):
// the gateway, who audits what it passes through and forwards, the store
// of its forwarding markers and kept answers, which serving run this is,
// and the upkeep between calls: the forwardings that stopped runs left,
// and the answers kept for retries. NewUpstreams makes one over a bot; the
// HTTP endpoint and the stdio server share it.
type Upstreams struct {
	// Gateway serves the upstreams' tools.
	Gateway *gateway.Gateway
	// Audit records what the gateway does outside a tool call (a refusal,
	// a dry run, an upstream's answer to an approved call).
	Audit AuditFunc
	// AuditRead records a read-only call passed straight through (queued
	// with the read verdicts' audit); nil: Audit.
	AuditRead AuditFunc
	// Store keeps the forwarding markers and the kept answers
	// (forwarding.go); nil: none, and a crash mid-call is not reported.
	Store kv.Store
	// Alive tells whether another run is still serving (replicas on one
	// database: bot.Runs' Alive). Nil: one process owns the store, so a
	// marker of another run is a past run's.
	Alive AliveFunc
	// Report records a forwarding whose outcome is unknown; Logger says
	// how many were found; Now is the clock (nil: time.Now).
	Report ReportFunc
	Logger *slog.Logger
	Now    func() time.Time

	run atomic.Pointer[string]
}

// NewUpstreams serves gw over b: its audit in b's chain under the default
// space, its markers in b's store, a forwarding of unknown outcome audited
// gateway_outcome_unknown and noted on the request's cards. alive is nil
// on a store one process owns.
func NewUpstreams(b *bot.Bot, gw *gateway.Gateway, alive AliveFunc, logger *slog.Logger) *Upstreams {
	space := bot.Space{UserID: "default"}
	return &Upstreams{
		Gateway: gw,
		Audit: func(ctx context.Context, caller *bot.Caller, action, detail string) error {
			return b.Chat().Audit(ctx, caller, space, action, detail)
		},
		AuditRead: func(ctx context.Context, caller *bot.Caller, action, detail string) error {
			return b.Chat().AuditRead(ctx, caller, space, action, detail)
		},
		Store: b.Store(),
		Alive: alive,
		Report: func(ctx context.Context, caller *bot.Caller, id, detail, note string, drop func(kv.Tx) error) error {
			item, err := b.Items().OfRequest(ctx, id)
			if err != nil {
				return err
			}
			return b.Chat().AuditNote(ctx, caller, space, "gateway_outcome_unknown", detail, item, note, drop)
		},
		Logger: logger,
		Now:    b.Now,
	}
}

// SetRun records the id of this serving run (the read audit's run claim),
// written into each forwarding marker so that its owner can be told alive
// or dead; "" (no claims: bbolt) makes a random one.
func (u *Upstreams) SetRun(id string) {
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = "local-" + hex.EncodeToString(b[:])
	}
	u.run.Store(&id)
}

// Run is this serving run's id; "" before SetRun.
func (u *Upstreams) Run() string {
	if p := u.run.Load(); p != nil {
		return *p
	}
	return ""
}

// ResultsKept is how long an upstream's answer is kept for a retry: far
// longer than any requestState (5 minutes) lives.
const ResultsKept = 24 * time.Hour

// Recover reports the forwardings that runs no longer alive left
// unfinished (RecoverForwarding): their outcome is unknown, and they are
// never run again. This run's own markers (Run) and those of live runs are
// left alone. At a start, before this run forwards anything, every past
// run's are reported.
func (u *Upstreams) Recover(ctx context.Context) (int, error) {
	rec := Recovery{Self: u.Run(), Alive: u.Alive, StaleAfter: StaleAfter(u.Gateway), Now: u.Now}
	n, err := RecoverForwarding(ctx, u.Store, rec, u.Report)
	if n > 0 && u.Logger != nil {
		u.Logger.Error("gateway: a run stopped while forwarding approved calls; their outcome is unknown (audited gateway_outcome_unknown), and they are not run again", "count", n)
	}
	return n, err
}

// SweepForwarding is the sweep step that reports the forwardings of a run
// that stopped while others keep serving (a replica killed mid-call). One
// process not serving yet reports nothing: its start reported the past
// runs' markers, and no other run can be told from this one.
func (u *Upstreams) SweepForwarding(ctx context.Context, _ time.Time) (int, error) {
	if u.Run() == "" && u.Alive == nil {
		return 0, nil
	}
	return u.Recover(ctx)
}

// SweepResults is the sweep step that drops the answers kept for retries
// longer than ResultsKept.
func (u *Upstreams) SweepResults(ctx context.Context, now time.Time) (int, error) {
	return PruneResults(ctx, u.Store, now.Add(-ResultsKept))
}
