package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/adapters/postgres"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/admintools"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
)

// auditStateBuckets are the buckets written only in the same transaction as
// an audit entry (principals and their keys, chat items, action requests,
// facts), as each domain names them: any content in them next to an empty
// chain means the chain was emptied. TestAuditStateBucketsExist checks
// that the wiring writes them.
func auditStateBuckets() []string {
	return append(bot.AuditedBuckets(), memory.AuditedBuckets()...)
}

// systemPrincipal is how the audit chain names Countersign itself.
const systemPrincipal = "countersign [system]"

// openSigningKey returns the audit signing key for a store open for
// writing: approvals.OpenSigningKey with audit.signing_key and serve's
// --new-signing-key.
func openSigningKey(cfg *config.Config, db kv.Store) (ed25519.PrivateKey, error) {
	return approvals.OpenSigningKey(context.Background(), db, approvals.KeyFile{
		Path: cfg.Audit.SigningKey, Rotate: cfg.Audit.NewSigningKey, StateBuckets: auditStateBuckets(), Principal: systemPrincipal,
	})
}

// checkAnchors refuses a store whose chain disagrees with the newest head
// in the configured anchor file: Countersign does not append to a chain
// that was rolled back, truncated or replaced. It returns the newest anchor
// (zero when there is none).
func checkAnchors(cfg *config.Config, db kv.Store) (approvals.Anchor, error) {
	path := cfg.Audit.Anchor.File
	if path == "" {
		return approvals.Anchor{}, nil
	}
	newest, err := approvals.CheckAnchorFile(context.Background(), db, path)
	var dis *approvals.AnchorDisagreement
	switch {
	case errors.As(err, &dis):
		return approvals.Anchor{}, fmt.Errorf("audit.anchor.file: %v. Countersign does not append to a chain that disagrees with its anchors. "+
			"Run `countersign audit verify --config FILE` to see the first break. If this store was restored from a backup on purpose, "+
			"move %s aside (keep it: it is evidence) and start again", dis.Err, path)
	case err != nil:
		return approvals.Anchor{}, fmt.Errorf("audit.anchor.file: %w", err)
	}
	return newest, nil
}

// wireAudit anchors the chain's head outside the store: at start, every
// audit.anchor.every when it has moved, and at close (after every other
// writer has stopped). Without an anchor file it warns, once a start.
func (a *app) wireAudit(ctx context.Context) error {
	ac := a.cfg.Audit.Anchor
	if ac.File == "" {
		a.log.Warn("audit.anchor.file is not set: the audit chain is verified only against itself, which cannot detect that the store was rolled back, truncated or replaced; set audit.anchor.file to a path outside the store's directory (docs/audit.md, \"Anchors\")")
		return nil
	}
	last, err := checkAnchors(a.cfg, a.db)
	if err != nil {
		return err
	}
	if _, ok := a.db.(*postgres.DB); ok {
		a.wireClusterAnchors(ac)
		return nil
	}
	anc := approvals.NewAnchorer(a.db, a.key, ac.File, a.bot.Now, last)
	anchor := func(ctx context.Context, when string) {
		if an, wrote, err := anc.Anchor(ctx); err != nil {
			a.log.Error("audit: could not anchor the chain's head", "when", when, "file", ac.File, "err", err)
		} else if wrote {
			a.log.Debug("audit: anchored", "when", when, "seq", an.Seq, "file", ac.File)
		}
	}
	a.runners = append(a.runners, runner{name: "audit anchor", run: func(ctx context.Context) error {
		anchor(ctx, "start")
		t := time.NewTicker(ac.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				anchor(ctx, "periodic")
			}
		}
	}})
	a.closers = append(a.closers, func() error { anchor(context.Background(), "stop"); return nil })
	return nil
}

// wireClusterAnchors is wireAudit on PostgreSQL: one anchor stream for the
// cluster, in audit.anchor.file (one file every replica mounts). Only the
// leader writes it: the anchor loop is one of the leader's loops
// (shareWithReplicas). Before each anchor it reads the stream's last
// anchor, whoever wrote it, and checks the chain against it; a chain that
// disagrees is not anchored. The term that ends with the server's shutdown
// anchors the final head. Every replica, leader or not, checks the chain
// against the stream's last anchor every audit.anchor.every and logs an
// error when they disagree (at start, a disagreement refuses to serve:
// checkAnchors).
func (a *app) wireClusterAnchors(ac config.AnchorConfig) {
	anchor := func(ctx context.Context, when string) {
		last, err := approvals.CheckLastAnchor(ctx, a.db, ac.File)
		if err != nil {
			a.log.Error("audit: not anchoring: the chain disagrees with the cluster's anchor file", "when", when, "file", ac.File, "err", err)
			return
		}
		anc := approvals.NewAnchorer(a.db, a.key, ac.File, a.bot.Now, last)
		if an, wrote, err := anc.Anchor(ctx); err != nil {
			a.log.Error("audit: could not anchor the chain's head", "when", when, "file", ac.File, "err", err)
		} else if wrote {
			a.log.Debug("audit: anchored", "when", when, "seq", an.Seq, "file", ac.File)
		}
	}
	a.runners = append(a.runners, runner{name: "audit anchor", run: func(ctx context.Context) error {
		anchor(ctx, "lead")
		t := time.NewTicker(ac.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				select {
				case <-a.bot.Closing():
					// The server stops (its calls are done): the final
					// head, while this replica still leads.
					actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					anchor(actx, "stop")
					cancel()
				default: // leadership lost: the next leader goes on
				}
				return nil
			case <-t.C:
				anchor(ctx, "periodic")
			}
		}
	}})
	a.replicaRunners = append(a.replicaRunners, runner{name: "audit anchor check", run: func(ctx context.Context) error {
		t := time.NewTicker(ac.Every)
		defer t.Stop()
		var said string
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			msg := ""
			if _, err := approvals.CheckLastAnchor(ctx, a.db, ac.File); err != nil && ctx.Err() == nil {
				msg = err.Error()
			}
			if msg != "" && msg != said {
				a.log.Error("audit: the chain disagrees with the cluster's anchor file", "file", ac.File, "err", msg)
			}
			said = msg
		}
	}})
}

// auditToolOptions are what verify_audit checks besides the chain: the
// anchor file and the state buckets.
func (a *app) auditToolOptions() admintools.Options {
	return admintools.Options{AnchorFile: a.cfg.Audit.Anchor.File, StateBuckets: auditStateBuckets()}
}
