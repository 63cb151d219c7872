package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/adapters/postgres"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/kv"
)

// storeHandle is an open store of either engine.
type storeHandle interface {
	Close() error
	// Buckets and SetSequence serve `store copy` (kv.Copy).
	kv.Copier
}

// openEngine opens the configured store for writing (readOnly: for reading
// only, which on bbolt does not take the writer's lock).
func openEngine(ctx context.Context, cfg *config.Config, getenv func(string) string, readOnly bool) (storeHandle, error) {
	if cfg.Store.Engine != config.EnginePostgres {
		if readOnly {
			return openStoreReadOnly(cfg)
		}
		if dir := filepath.Dir(cfg.Store.Path); !fileExists(dir) {
			return nil, fmt.Errorf("store.path: the directory %s does not exist; create it (mkdir -p %s) or point store.path at a file in an existing directory", dir, dir)
		}
		return bolt.Open(cfg.Store.Path, cfg.Store.BoltOptions())
	}
	pc := cfg.Store.Postgres
	dsn, err := pc.DSN(getenv) // config/store.go
	if err != nil {
		return nil, err
	}
	hb, hk, hs := approvals.ChainHead()
	db, err := postgres.Open(ctx, dsn, postgres.Options{
		MaxConns:         int32(pc.MaxConns),
		StatementTimeout: pc.StatementTimeout,
		GroupCommit:      cfg.Store.GroupCommitOn(),
		Watch:            watchedBuckets,
		Prefetch:         postgres.Prefetch{Keys: []postgres.Key{{Bucket: hb, Key: hk}}, Sequences: []string{hs}},
	})
	if err != nil {
		return nil, fmt.Errorf("store (postgres, $%s): %w", pc.DSNEnv, err)
	}
	return db, nil
}

// readiness is /readyz's check: the store answers a read within a short
// deadline (a database that is down or paused is not ready).
func readiness(db kv.Store) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b, k, _ := approvals.ChainHead()
		return db.View(ctx, func(tx kv.Tx) error {
			_, err := tx.Get(b, k)
			return err
		})
	}
}

// storeCommands are the store subcommands' usage lines.
const storeCommands = `  countersign store copy --from-config A --to-config B
  countersign store compact [--config FILE] [--full]
  countersign store backup --to FILE [--config FILE] [--url URL] [--key KEY] [--pubkey HEX] [--timeout 30m]
  countersign store restore --from FILE [--config FILE]`

const storeUsage = "usage:\n" + storeCommands + `

copy copies every bucket of the store of config A into the empty store of
config B (bbolt to postgres, or back), with the sequences, then verifies the
audit chain on B. Stop every server of both stores first.
backup downloads a consistent copy of the bbolt store from the running
server (an admin key), checks it and writes it to FILE; restore checks a
backup and makes it the store of the config (docs/operations.md, "Backups
and restore"). compact rewrites a bbolt store without its free pages (server
stopped); on PostgreSQL it vacuums the tables while the replicas serve, and
--full rewrites them, locking each while it does (store_cmd.go)`

// cmdStore runs the store subcommands.
func cmdStore(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "compact" {
		return cmdStoreCompact(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "backup" {
		return cmdStoreBackup(ctx, args[1:], getenv, stdout, stderr) // store_backup.go
	}
	if len(args) > 0 && args[0] == "restore" {
		return cmdStoreRestore(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "copy" {
		return errors.New(storeUsage)
	}
	fs := newFlagSet("store copy", stderr)
	from := fs.String("from-config", "", "the config of the store to copy (required)")
	to := fs.String("to-config", "", "the config of the empty store to copy into (required)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *from == "" || *to == "" {
		return errors.New("--from-config and --to-config are both required\n" + storeUsage)
	}
	src, err := config.Load(*from)
	if err != nil {
		return err
	}
	dst, err := config.Load(*to)
	if err != nil {
		return err
	}
	return storeCopy(ctx, src, dst, getenv, stdout)
}

// storeCopy copies src's store into dst's, then verifies the chain there.
func storeCopy(ctx context.Context, src, dst *config.Config, getenv func(string) string, stdout io.Writer) error {
	pub, err := configuredPublicKey(src)
	if err != nil {
		return err
	}
	if err := approvals.CopyKeyFile(src.Audit.SigningKey, dst.Audit.SigningKey); err != nil {
		return fmt.Errorf("store copy: %w", err)
	}
	from, err := openEngine(ctx, src, getenv, true)
	if err != nil {
		return fmt.Errorf("--from-config: %w", err)
	}
	defer from.Close()
	to, err := openEngine(ctx, dst, getenv, false)
	if err != nil {
		return fmt.Errorf("--to-config: %w", err)
	}
	defer to.Close()
	copied, err := kv.Copy(ctx, from, to)
	var notEmpty *kv.NotEmptyError
	if errors.As(err, &notEmpty) {
		return fmt.Errorf("--to-config: the target store is not empty (%d buckets); copy only into a new store, so that two histories never mix", notEmpty.Buckets)
	}
	if err != nil {
		return err
	}
	total, names := copied.Keys, copied.Buckets
	rep, err := approvals.Verify(ctx, to, pub)
	if err != nil {
		return err
	}
	if !rep.Intact {
		fmt.Fprintf(stdout, "⚠ Copied %d keys in %d buckets, but the audit chain on the target is BROKEN at seq %d: %s.\n", total, names, rep.BrokenAt, rep.Reason)
		return errChainBroken
	}
	fmt.Fprintf(stdout, "✓ Copied %d keys in %d buckets (%s → %s). Audit chain INTACT on the target — %d entries verified.\n", total, names, src.Store.Engine, dst.Store.Engine, rep.Entries)
	return nil
}
