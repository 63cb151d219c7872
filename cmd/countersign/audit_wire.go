package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/countersign/countersign/adapters/postgres"
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

// openSigningKey returns the audit signing key for a store that is open
// for writing. A new store gets a new key (created on first start). A store
// that already holds a chain gets only the key that signs it: a missing or
// different key file refuses to start, unless serve was given
// --new-signing-key, which rotates to a new key (or to the one in the file)
// with a signed entry linking the old and the new public key.
func openSigningKey(cfg *Config, db kv.Store) (ed25519.PrivateKey, error) {
	ctx := context.Background()
	path := cfg.Audit.SigningKey
	var hasChain bool
	var spans []approvals.KeySpan
	var emptied bool
	err := db.View(ctx, func(tx kv.Tx) error {
		var err error
		if emptied, err = approvals.Emptied(tx, auditStateBuckets()); err != nil || emptied {
			return err
		}
		if hasChain, err = approvals.HasChain(tx); err != nil || !hasChain {
			return err
		}
		spans, err = approvals.Keys(tx, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	if emptied {
		return nil, errors.New("store.path: the store holds principals, requests or facts but no audit chain: the chain was emptied. " +
			"Countersign does not start a new chain over a wiped one. Restore the store from a backup, and run `countersign audit verify --config FILE`")
	}
	if !hasChain {
		return loadSigningKey(path)
	}
	chainKey := spans[len(spans)-1].PublicKey // "" for a chain that never recorded its key
	named := "its newest head"
	if chainKey != "" {
		named = "key " + chainKey
	}
	if !fileExists(path) {
		if !cfg.Audit.newSigningKey {
			return nil, fmt.Errorf("audit.signing_key: no key at %s, but the store already holds an audit chain signed by %s. "+
				"Restore the key file from your backup and start again. If the key is lost, start once with "+
				"`countersign serve --config FILE --new-signing-key`: it creates a new key and appends a signed entry "+
				"linking the old public key to the new one (the old entries keep verifying with the old key; "+
				"auditors who pin keys must add the new one; see docs/audit.md, \"Key rotation\")", path, named)
		}
	}
	key, err := loadSigningKey(path)
	if err != nil {
		return nil, err
	}
	pub := key.Public().(ed25519.PublicKey)
	var signed bool
	if err := db.View(ctx, func(tx kv.Tx) error {
		signed, err = approvals.SignedBy(tx, pub)
		return err
	}); err != nil {
		return nil, err
	}
	switch {
	case signed && cfg.Audit.newSigningKey:
		return nil, fmt.Errorf("--new-signing-key: the key at %s already signs the audit chain; to retire it, move the file aside first (keep it until auditors have the new public key)", path)
	case signed:
		if chainKey == "" { // a chain from before the key index: record its key now
			err := db.Update(ctx, func(tx kv.Tx) error { return approvals.RecordKey(tx, pub) })
			return key, err
		}
		return key, nil
	case !cfg.Audit.newSigningKey:
		return nil, fmt.Errorf("audit.signing_key: the key at %s (public key %x) does not sign this store's audit chain (signed by %s); "+
			"point audit.signing_key at the chain's key, or start once with `countersign serve --config FILE --new-signing-key` "+
			"to rotate to this key with a signed entry in the chain (docs/audit.md, \"Key rotation\")", path, []byte(pub), named)
	case chainKey == "":
		return nil, fmt.Errorf("--new-signing-key: this chain was created before Countersign recorded its keys, so the old public key is unknown; restore the old key file and start once with it, then rotate")
	}
	old, _ := hex.DecodeString(chainKey)
	err = db.Update(ctx, func(tx kv.Tx) error {
		_, err := approvals.RotateKey(tx, key, time.Now(), old, systemPrincipal, "rotated with --new-signing-key")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("--new-signing-key: %w", err)
	}
	return key, nil
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
func (a *app) wireClusterAnchors(ac AnchorConfig) {
	anchor := func(ctx context.Context, when string) {
		last, err := lastClusterAnchor(ctx, ac.File, a.db)
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
			if _, err := lastClusterAnchor(ctx, ac.File, a.db); err != nil && ctx.Err() == nil {
				msg = err.Error()
			}
			if msg != "" && msg != said {
				a.log.Error("audit: the chain disagrees with the cluster's anchor file", "file", ac.File, "err", msg)
			}
			said = msg
		}
	}})
}

// lastClusterAnchor reads the last anchor of the stream at path (zero when
// there is none yet) and checks the chain against it.
func lastClusterAnchor(ctx context.Context, path string, db kv.Store) (approvals.Anchor, error) {
	last, ok, err := approvals.ReadLastAnchor(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && !ok {
		return approvals.Anchor{}, nil
	}
	if err != nil {
		return approvals.Anchor{}, err
	}
	if err := db.View(ctx, func(tx kv.Tx) error { return approvals.CheckAnchor(tx, last) }); err != nil {
		return approvals.Anchor{}, err
	}
	return last, nil
}

// auditToolOptions are what verify_audit checks besides the chain: the
// anchor file and the state buckets.
func (a *app) auditToolOptions() admintools.Options {
	return admintools.Options{AnchorFile: a.cfg.Audit.Anchor.File, StateBuckets: auditStateBuckets()}
}
