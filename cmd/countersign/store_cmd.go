package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/adapters/postgres"
	"github.com/countersign/countersign/config"
)

// cmdStoreCompact runs `store compact`. On bbolt it rewrites the store file
// without its free pages, offline (a running server holds the lock). On
// PostgreSQL it vacuums Countersign's tables while the replicas serve, and
// with --full rewrites them (postgres.DB.Compact).
func cmdStoreCompact(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("store compact", stderr)
	load := configFlag(fs)
	full := fs.Bool("full", false, "PostgreSQL: VACUUM FULL, which gives the space back to the disk but locks each table while it is rewritten (bbolt always rewrites the file)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if cfg.Store.Engine == config.EnginePostgres {
		return compactPostgres(ctx, cfg, getenv, *full, stdout)
	}
	if !fileExists(cfg.Store.Path) {
		return fmt.Errorf("store.path: %s does not exist; nothing to compact", cfg.Store.Path)
	}
	rep, err := bolt.Compact(cfg.Store.Path, time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "compacted %s: %s -> %s (%.0f%% smaller), %d keys in %d buckets, in %s\n",
		rep.Path, mib(rep.Before), mib(rep.After), smaller(rep.Before, rep.After), rep.Keys, rep.Buckets, rep.Took.Round(time.Millisecond))
	return nil
}

// compactPostgres is store compact on PostgreSQL.
func compactPostgres(ctx context.Context, cfg *config.Config, getenv func(string) string, full bool, stdout io.Writer) error {
	h, err := openEngine(ctx, cfg, getenv, false)
	if err != nil {
		return err
	}
	defer h.Close()
	pg, ok := h.(*postgres.DB)
	if !ok {
		return fmt.Errorf("store compact: store.engine %s did not open a PostgreSQL store", cfg.Store.Engine)
	}
	rep, err := pg.Compact(ctx, full)
	if err != nil {
		return err
	}
	how, next := "VACUUM (ANALYZE)", "; the space of deleted rows is reused by later writes. To give it back to the disk, run again with --full in a maintenance window (each table is locked while it is rewritten)"
	if full {
		how, next = "VACUUM (FULL, ANALYZE)", ""
	}
	fmt.Fprintf(stdout, "compacted postgres ($%s) with %s: %s -> %s (%.0f%% smaller), %d keys, in %s%s\n",
		cfg.Store.Postgres.DSNEnv, how, mib(rep.Before), mib(rep.After), smaller(rep.Before, rep.After), rep.Keys, rep.Took.Round(time.Millisecond), next)
	return nil
}

// mib renders a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// smaller is how much smaller after is than before, in percent.
func smaller(before, after int64) float64 {
	if before <= 0 {
		return 0
	}
	return 100 * float64(before-after) / float64(before)
}
