package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/kv"
)

// errChainBroken is returned by `audit verify` when the chain does not
// verify, so that the command exits non-zero.
var errChainBroken = errors.New("the audit chain is broken")

// auditCommands are the audit subcommands' usage lines.
const auditCommands = `  countersign audit verify [--config FILE] [--anchors FILE] [--pubkey HEX[,HEX...]] [--archive FILE]...
  countersign audit anchor [--config FILE] [--anchors FILE]
  countersign audit archive [--config FILE] --before DATE --out FILE
  countersign audit export [--config FILE]
  countersign audit pubkey [--config FILE]`

const auditUsage = "usage:\n" + auditCommands

// cmdAudit runs the audit subcommands. They read the store while the
// server is stopped (a running server holds the store's lock).
func cmdAudit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(auditUsage)
	}
	fs := newFlagSet("audit "+args[0], stderr)
	load := configFlag(fs)
	var pubHex, anchorsFlag, before, out *string
	var archives []string
	switch args[0] {
	case "verify":
		pubHex = fs.String("pubkey", "", "trust only these Ed25519 public keys (hex, as export_public_key prints them; several separated by commas) instead of the configured signing key")
		anchorsFlag = fs.String("anchors", "", "check the chain against this anchor file instead of audit.anchor.file")
		fs.Func("archive", "an archive segment written by `audit archive` (repeat, oldest first): verify the whole history through it", func(v string) error {
			archives = append(archives, v)
			return nil
		})
	case "archive":
		before = fs.String("before", "", "archive the entries older than this date (2026-01-31 or RFC 3339; required)")
		out = fs.String("out", "", "the segment file to write; it must not exist (required)")
	case "anchor":
		anchorsFlag = fs.String("anchors", "", "append to this anchor file instead of audit.anchor.file")
	case "export", "pubkey":
	default:
		return fmt.Errorf("unknown audit command %q\n%s", args[0], auditUsage)
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if args[0] == "pubkey" {
		pub, err := configuredPublicKey(cfg)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, hex.EncodeToString(pub))
		return nil
	}
	if args[0] == "archive" {
		return auditArchive(ctx, cfg, getenv, *before, *out, stdout)
	}
	db, err := openEngine(ctx, cfg, getenv, true)
	if err != nil {
		return err
	}
	defer db.Close()
	switch args[0] {
	case "export":
		_, err := approvals.Export(ctx, db, stdout)
		return err
	case "anchor":
		return auditAnchor(ctx, cfg, db, *anchorsFlag, stdout)
	}
	var trusted []ed25519.PublicKey
	if *pubHex != "" {
		if trusted, err = approvals.ParsePublicKeys(*pubHex); err != nil {
			return fmt.Errorf("--pubkey: %v", err)
		}
	} else {
		pub, err := configuredPublicKey(cfg)
		if err != nil {
			return fmt.Errorf("%w; or trust a key you hold with --pubkey HEX", err)
		}
		trusted = []ed25519.PublicKey{pub}
	}
	opts := approvals.VerifyOptions{Trusted: trusted, StateBuckets: auditStateBuckets()}
	if opts.Archives, err = approvals.ReadSegmentFiles(archives); err != nil {
		return fmt.Errorf("--archive: %w", err)
	}
	anchorPath, note := *anchorsFlag, ""
	if anchorPath == "" {
		anchorPath = cfg.Audit.Anchor.File
	}
	if anchorPath != "" {
		anchors, err := approvals.ReadAnchors(anchorPath)
		switch {
		case errors.Is(err, os.ErrNotExist) && *anchorsFlag == "":
			note = "  anchors: none yet at " + anchorPath + "\n"
		case err != nil:
			return fmt.Errorf("--anchors: %w", err)
		}
		opts.Anchors = anchors
	} else {
		note = "  anchors: none (audit.anchor.file is not set): this shows the chain is consistent with itself, not that it was not rolled back\n"
	}
	rep, err := approvals.VerifyWith(ctx, db, opts)
	if err != nil {
		return err
	}
	rep.WriteText(stdout, len(archives), note)
	if !rep.Intact {
		return errChainBroken
	}
	return nil
}

// auditAnchor appends the chain's signed head to the anchor file, with the
// server stopped, after checking the chain against the newest anchor
// already there.
func auditAnchor(ctx context.Context, cfg *config.Config, db kv.Store, path string, stdout io.Writer) error {
	if path == "" {
		path = cfg.Audit.Anchor.File
	}
	if path == "" {
		return errors.New("audit.anchor.file: not set; set it in the config or pass --anchors FILE")
	}
	key, err := configuredSigningKey(cfg)
	if err != nil {
		return err
	}
	c := *cfg
	c.Audit.Anchor.File = path
	last, err := checkAnchors(&c, db)
	if err != nil {
		return err
	}
	an, wrote, err := approvals.NewAnchorer(db, key, path, nil, last).Anchor(ctx)
	switch {
	case err != nil:
		return err
	case an.Seq == 0:
		fmt.Fprintln(stdout, "The audit chain is empty: nothing to anchor.")
	case !wrote:
		fmt.Fprintf(stdout, "Already anchored: seq %d hash %s in %s\n", an.Seq, an.Hash, path)
	default:
		fmt.Fprintf(stdout, "Anchored: seq %d hash %s in %s\n", an.Seq, an.Hash, path)
	}
	return nil
}

// openStoreReadOnly opens an existing store without taking the writer's
// lock; it fails clearly while a server holds the store.
func openStoreReadOnly(cfg *config.Config) (*bolt.DB, error) {
	if _, err := os.Stat(cfg.Store.Path); err != nil {
		return nil, fmt.Errorf("store.path: no store at %s (%v); point --config at the server's config", cfg.Store.Path, errors.Unwrap(err))
	}
	return bolt.Open(cfg.Store.Path, bolt.Options{ReadOnly: true})
}

// configuredPublicKey reads the audit signing key's public half. Unlike
// serve, it never creates a key.
func configuredPublicKey(cfg *config.Config) (ed25519.PublicKey, error) {
	key, err := configuredSigningKey(cfg)
	if err != nil {
		return nil, err
	}
	return key.Public().(ed25519.PublicKey), nil
}

// configuredSigningKey reads the audit signing key of a store that exists
// (audit, store restore, the hook); it never creates one
// (approvals.ReadSigningKey).
func configuredSigningKey(cfg *config.Config) (ed25519.PrivateKey, error) {
	if _, err := os.Stat(cfg.Audit.SigningKey); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("audit.signing_key: no key at %s; point --config at the server's config (its audit.signing_key is the key the store is signed with)", cfg.Audit.SigningKey)
	}
	return approvals.ReadSigningKey(cfg.Audit.SigningKey)
}
