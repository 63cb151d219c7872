package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/admintools"
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
func openSigningKey(cfg *Config, db kv.Store) (ed25519.PrivateKey, error) {
	return approvals.OpenSigningKey(context.Background(), db, approvals.KeyFile{
		Path: cfg.Audit.SigningKey, Rotate: cfg.Audit.newSigningKey, StateBuckets: auditStateBuckets(), Principal: systemPrincipal,
	})
}

// checkAnchors refuses a store whose chain disagrees with the newest head
// in the configured anchor file: Countersign does not append to a chain
// that was rolled back, truncated or replaced. It returns the newest anchor
// (zero when there is none).
func checkAnchors(cfg *Config, db kv.Store) (approvals.Anchor, error) {
	path := cfg.Audit.Anchor.File
	if path == "" {
		return approvals.Anchor{}, nil
	}
	anchors, err := approvals.ReadAnchors(path)
	if errors.Is(err, os.ErrNotExist) {
		return approvals.Anchor{}, nil
	}
	if err != nil {
		return approvals.Anchor{}, fmt.Errorf("audit.anchor.file: %w", err)
	}
	newest, ok := approvals.Newest(anchors)
	if !ok {
		return approvals.Anchor{}, nil
	}
	err = db.View(context.Background(), func(tx kv.Tx) error { return approvals.CheckAnchor(tx, newest) })
	if err != nil {
		return approvals.Anchor{}, fmt.Errorf("audit.anchor.file: %v. Countersign does not append to a chain that disagrees with its anchors. "+
			"Run `countersign audit verify --config FILE` to see the first break. If this store was restored from a backup on purpose, "+
			"move %s aside (keep it: it is evidence) and start again", err, path)
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

// auditToolOptions are what verify_audit checks besides the chain: the
// anchor file and the state buckets.
func (a *app) auditToolOptions() admintools.Options {
	return admintools.Options{AnchorFile: a.cfg.Audit.Anchor.File, StateBuckets: auditStateBuckets()}
}
