package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/adapters/mcp"
	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/adapters/tracing"
	"github.com/countersign/countersign/adapters/webhook"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/config"
)

// app is everything serve wires together.
type app struct {
	cfg *config.Config
	db  storeHandle
	key ed25519.PrivateKey // the audit signing key
	bot *bot.Bot
	// people is the directory of the configured people (wireChat), the
	// one answer to "who is this person" the surfaces are wired with.
	people *bot.Directory
	log    *slog.Logger
	getenv func(string) string
	mounts map[string]http.Handler
	// trust is what the Host and Origin guard checks less on a mount
	// (webhook.Options.Trust): signed platform webhooks, the console.
	trust   map[string]webhook.Trust
	mw      []func(http.Handler) http.Handler
	runners []runner
	// replicaRunners run on every replica of a PostgreSQL store, outside
	// leadership (replicas.go); unused on bbolt.
	replicaRunners []runner
	closers        []func() error
	// wakeStatus wakes the long polls on a request (replicas.go).
	wakeStatus func(id string)
	// onRequest is told about every finished HTTP request (metrics).
	onRequest func(pattern string, status int, d time.Duration)
	// auth authenticates the bearer credential of the HTTP API and MCP
	// over HTTP: the bot (keys), or keys and OAuth tokens (wire_oauth.go).
	auth webhook.Authenticator
	// tracing makes the spans of the edges (tracing.go); nil: off.
	tracing *tracing.Tracing
	// gateway serves the tools of gateway.upstreams (wire_gateway.go);
	// nil: none configured.
	gateway *gateway.Gateway
	// upstreams serves the gateway on the MCP endpoints (wire_gateway.go);
	// nil: none configured.
	upstreams *mcp.Upstreams
}

// runner is a background loop owned by serve; it returns when ctx ends.
type runner struct {
	name string
	run  func(ctx context.Context) error
	// everyReplica: on PostgreSQL it runs on every replica, outside
	// leadership (the work this process acknowledged, the upstream
	// processes it started), not only on the leader (replicas.go).
	everyReplica bool
}

// startRunners starts loops under ctx. A loop that fails is reported to
// failed (from its own goroutine), its name said; stop ends every loop and
// waits for them to return.
func startRunners(ctx context.Context, loops []runner, failed func(error)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, r := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				failed(fmt.Errorf("%s: %w", r.name, err))
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// openStore opens the configured store (store.engine) and the audit
// signing key, after checking the chain against its newest anchor.
func openStore(ctx context.Context, cfg *config.Config, getenv func(string) string) (storeHandle, ed25519.PrivateKey, error) {
	db, err := openEngine(ctx, cfg, getenv, false)
	if errors.Is(err, bolt.ErrLocked) {
		return nil, nil, fmt.Errorf("%w (%s): is ./countersign serve running on it? Stop it first; while it runs, use the HTTP API instead (an admin key's create_principal makes keys)", err, cfg.Store.Path)
	}
	if err != nil {
		return nil, nil, err
	}
	// The chain against its newest anchor, then the key that signs it
	// (audit_wire.go).
	if _, err := checkAnchors(cfg, db); err != nil {
		db.Close()
		return nil, nil, err
	}
	key, err := openSigningKey(cfg, db)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	if cfg.Store.Engine == config.EnginePostgres {
		if err := approvals.PinSigningKey(ctx, db, key.Public().(ed25519.PublicKey)); err != nil {
			db.Close()
			return nil, nil, err
		}
	}
	return db, key, nil
}

// buildApp opens the store and wires the bot, its tools and the edges.
func buildApp(ctx context.Context, cfg *config.Config, getenv func(string) string, logger *slog.Logger) (*app, error) {
	db, key, err := openStore(ctx, cfg, getenv)
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, db: db, key: key, log: logger, getenv: getenv, mounts: map[string]http.Handler{}, trust: map[string]webhook.Trust{}}
	a.closers = append(a.closers, db.Close)
	if err := a.startTracing(ctx); err != nil { // tracing.go
		a.close()
		return nil, err
	}
	a.bot, err = bot.New(bot.Options{Store: a.tracedStore(db), SigningKey: key, Logger: a.log, Sinks: cfg.Sinks(), DeliveryTTL: cfg.Retention.Deliveries,
		MaxOpenItems: cfg.Limits.OpenItemsPerRequester,
		Now:          clockFrom(ctx), // nil: time.Now; a settable clock in the end-to-end tests
		// One process holds a bbolt file, so its revocations are the only
		// ones: the principal cache is safe there. Replicas on PostgreSQL
		// read every key from the database.
		CachePrincipals: cfg.Store.Engine == config.EngineBolt,
		Tracing:         a.tracing.Provider(), // nil: off (tracing.go)
		Groups:          cfg.Groups,
		OnCall:          cfg.Rotations()})
	if err != nil {
		a.close()
		return nil, err
	}
	for _, wire := range []func(context.Context) error{a.wireChat, a.wireMemory, a.wireActions, a.wireOAuth, a.wireGateway, a.wireAdmin, a.wireBackup, a.wireSlack, a.wireDiscord, a.wireTeams, a.wireWeb, a.wireEmail, a.wireSCIM, a.wireAudit, a.connectGateway} {
		if err := wire(ctx); err != nil {
			a.close()
			return nil, err
		}
	}
	// Who left a group of config.yaml since the last start no longer
	// counts where the group does (bot/configgroups.go).
	ids, err := a.bot.RecheckConfiguredGroups(ctx)
	if err != nil {
		a.close()
		return nil, fmt.Errorf("groups: %w", err)
	}
	if len(ids) > 0 {
		a.log.Warn("groups: people config.yaml no longer lists in a group had approvals counting for it; they no longer count (audited group_votes_void)", "items", len(ids))
	}
	a.shareWithReplicas()
	return a, nil
}

func (a *app) handler() http.Handler {
	return webhook.NewServer(webhook.Options{
		App:        a.bot,
		Logger:     a.log,
		MaxBody:    a.cfg.HTTP.MaxBodyBytes,
		Ready:      readiness(a.db),
		Degraded:   a.degraded(), // wire_gateway.go
		Mounts:     a.mounts,
		Middleware: a.mw,
		OnRequest:  a.onRequest,
		Auth:       a.auth,
		Guard:      webhook.NewHostGuard(a.cfg.AllowedHosts(), a.cfg.AllowedOrigins(), a.log),
		Trust:      a.trust,
		Trace:      a.tracing.Handler, // a span per request; off: the handler as it is (tracing.go)
	})
}

// close releases everything in reverse order of acquisition.
func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			a.log.Warn("close", "err", err)
		}
	}
	a.closers = nil
}
