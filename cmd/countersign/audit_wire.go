package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

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

// wireAudit anchors the chain's head outside the store
// (approvals.Anchoring): on bbolt at start, every audit.anchor.every when
// it has moved, and at close (after every other writer has stopped); on
// PostgreSQL one stream for the cluster, written by the leader (one of the
// leader's loops: shareWithReplicas) and checked by every replica. Without
// an anchor file it warns, once a start.
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
	o := approvals.Anchoring{Store: a.db, Key: a.key, File: ac.File, Every: ac.Every, Now: a.bot.Now, Log: a.log}
	if _, ok := a.db.(*postgres.DB); ok {
		a.runners = append(a.runners, runner{name: "audit anchor", run: func(ctx context.Context) error { return o.Lead(ctx, a.bot.Closing()) }})
		a.replicaRunners = append(a.replicaRunners, runner{name: "audit anchor check", run: o.Watch})
		return nil
	}
	run, final := o.Single(last)
	a.runners = append(a.runners, runner{name: "audit anchor", run: run})
	a.closers = append(a.closers, func() error { final(); return nil })
	return nil
}

// auditToolOptions are what verify_audit checks besides the chain: the
// anchor file and the state buckets.
func (a *app) auditToolOptions() admintools.Options {
	return admintools.Options{AnchorFile: a.cfg.Audit.Anchor.File, StateBuckets: auditStateBuckets()}
}
