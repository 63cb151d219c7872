package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
)

// errChainBroken is returned by `audit verify` when the chain does not
// verify, so that the command exits non-zero.
var errChainBroken = errors.New("the audit chain is broken")

const auditUsage = `usage:
  countersign audit verify [--config FILE] [--pubkey HEX]
  countersign audit export [--config FILE]
  countersign audit pubkey [--config FILE]`

// cmdAudit runs the audit subcommands. They read the store while the
// server is stopped (a running server holds the store's lock).
func cmdAudit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(auditUsage)
	}
	fs := newFlagSet("audit "+args[0], stderr)
	load := configFlag(fs)
	var pubHex *string
	if args[0] == "verify" {
		pubHex = fs.String("pubkey", "", "verify with this Ed25519 public key (hex, as export_public_key prints it) instead of the configured signing key's")
	}
	switch args[0] {
	case "verify", "export", "pubkey":
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
	db, err := openEngine(ctx, cfg, getenv, true)
	if err != nil {
		return err
	}
	defer db.Close()
	if args[0] == "export" {
		_, err := approvals.Export(ctx, db, stdout)
		return err
	}
	var pub ed25519.PublicKey
	if *pubHex != "" {
		b, err := hex.DecodeString(strings.TrimSpace(*pubHex))
		if err != nil || len(b) != ed25519.PublicKeySize {
			return fmt.Errorf("--pubkey: want %d bytes of hex (64 characters), as export_public_key prints it", ed25519.PublicKeySize)
		}
		pub = b
	} else if pub, err = configuredPublicKey(cfg); err != nil {
		return err
	}
	rep, err := approvals.Verify(ctx, db, pub)
	if err != nil {
		return err
	}
	if !rep.Intact {
		fmt.Fprintf(stdout, "⚠ Audit chain BROKEN at seq %d: %s.\n", rep.BrokenAt, rep.Reason)
		return errChainBroken
	}
	fmt.Fprintf(stdout, "✓ Audit chain INTACT — %d entries verified.\n", rep.Entries)
	if rep.Head.Seq > 0 {
		// Keep this line somewhere else: a copy of the whole store rolled
		// back to an earlier state verifies on its own, but not against it.
		fmt.Fprintf(stdout, "  head: seq %d hash %s\n", rep.Head.Seq, rep.Head.Hash)
	}
	return nil
}

// openStoreReadOnly opens an existing store without taking the writer's
// lock; it fails clearly while a server holds the store.
func openStoreReadOnly(cfg *Config) (*bolt.DB, error) {
	if _, err := os.Stat(cfg.Store.Path); err != nil {
		return nil, fmt.Errorf("store.path: no store at %s (%v); point --config at the server's config", cfg.Store.Path, errors.Unwrap(err))
	}
	return bolt.Open(cfg.Store.Path, bolt.Options{ReadOnly: true})
}

// configuredPublicKey reads the audit signing key's public half. Unlike
// serve, it never creates a key.
func configuredPublicKey(cfg *Config) (ed25519.PublicKey, error) {
	if _, err := os.Stat(cfg.Audit.SigningKey); err != nil {
		return nil, fmt.Errorf("audit.signing_key: no key at %s (%v); pass --pubkey HEX, or point --config at the server's config", cfg.Audit.SigningKey, errors.Unwrap(err))
	}
	key, err := loadSigningKey(cfg.Audit.SigningKey)
	if err != nil {
		return nil, err
	}
	return key.Public().(ed25519.PublicKey), nil
}
