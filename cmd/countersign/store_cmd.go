package main

import (
	"fmt"
	"io"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
)

// cmdStoreCompact runs `store compact`: it rewrites the bbolt store file
// without its free pages. It is offline (a running server holds the lock).
func cmdStoreCompact(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("store compact", stderr)
	load := configFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if cfg.Store.Engine != engineBolt {
		return fmt.Errorf("store compact: store.engine is %s; compact is for the bbolt file (PostgreSQL reclaims space with VACUUM)", cfg.Store.Engine)
	}
	if !fileExists(cfg.Store.Path) {
		return fmt.Errorf("store.path: %s does not exist; nothing to compact", cfg.Store.Path)
	}
	rep, err := bolt.Compact(cfg.Store.Path, time.Second)
	if err != nil {
		return err
	}
	saved := 0.0
	if rep.Before > 0 {
		saved = 100 * float64(rep.Before-rep.After) / float64(rep.Before)
	}
	fmt.Fprintf(stdout, "compacted %s: %s -> %s (%.0f%% smaller), %d keys in %d buckets, in %s\n",
		rep.Path, mib(rep.Before), mib(rep.After), saved, rep.Keys, rep.Buckets, rep.Took.Round(time.Millisecond))
	return nil
}

// mib renders a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
