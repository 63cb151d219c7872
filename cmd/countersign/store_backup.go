package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/config"
)

// cmdStoreBackup runs `store backup`: it downloads a consistent copy of the
// store from the running server (GET /v1/admin/backup, an admin key),
// checks it (bbolt's consistency check, then the audit chain in it), and
// only then puts it at --to, which must not exist. Nothing is left at --to
// when any step fails, so a cron job that exits 0 has a good backup.
func cmdStoreBackup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("store backup", stderr)
	load := configFlag(fs)
	to := fs.String("to", "", "the backup file to write; it must not exist (required)")
	urlFlag := fs.String("url", "", "the running server's base URL (default $"+urlEnv+", else http:// and the config's listen)")
	keyFlag := fs.String("key", "", "an admin API key not limited to some user_ids (default $"+apiKeyEnv+")")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up (and keep nothing) after this long")
	pubHex := fs.String("pubkey", "", "verify the copy's audit chain under this public key (hex, as `audit pubkey` prints it) instead of the one the server names")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *to == "" {
		return errors.New("store backup: --to FILE is required (for example --to /var/backups/countersign/countersign-$(date +%F).db)")
	}
	if _, err := os.Lstat(*to); err == nil {
		return fmt.Errorf("store backup: --to: %s already exists; a backup never overwrites a file (name each one by its date)", *to)
	}
	var pinned ed25519.PublicKey
	if *pubHex != "" {
		var err error
		if pinned, err = client.ParsePublicKey(*pubHex); err != nil {
			return fmt.Errorf("--pubkey: %w", err)
		}
	}
	key := apiKey(*keyFlag, getenv, apiKeyEnv)
	if key == "" {
		return fmt.Errorf("store backup: no API key: give --key KEY or set $%s to an admin key (countersign keys create --role admin)", apiKeyEnv)
	}
	base, err := serverURL(*urlFlag, load, getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	tmp, err := os.CreateTemp(filepath.Dir(*to), filepath.Base(*to)+".partial-*")
	if err != nil {
		return fmt.Errorf("store backup: --to: %w", err)
	}
	keep := false
	defer func() {
		tmp.Close()
		if !keep {
			os.Remove(tmp.Name())
		}
	}()
	api, err := client.NewAPI(base, key)
	if err != nil {
		return fmt.Errorf("store backup: %w", err)
	}
	got, err := api.Backup(ctx, tmp)
	if err != nil {
		return backupError(base, err)
	}
	announced, n := got.PublicKey, got.Bytes
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("store backup: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("store backup: %w", err)
	}
	pub, against := pinned, "the key pinned with --pubkey"
	if pub == nil {
		if pub, err = client.ParsePublicKey(announced); err != nil {
			return fmt.Errorf("store backup: the server named no audit key (%s: %q); pass --pubkey HEX", client.BackupKeyHeader, announced)
		}
		against = "the key the server names (pin one with --pubkey)"
	}
	file, chain, err := checkBackup(ctx, tmp.Name(), pub)
	if err != nil {
		return fmt.Errorf("store backup: the copy from %s is not good, and nothing was written to %s: %w", base, *to, err)
	}
	if err := bolt.PlaceNew(tmp.Name(), *to); err != nil {
		return fmt.Errorf("store backup: --to: %w", err)
	}
	fmt.Fprintf(stdout, "✓ Backed up %s (%d keys in %d buckets) from %s to %s. Audit chain INTACT in the copy — %d entries verified under %s.\n",
		mib(n), file.Keys, file.Buckets, base, *to, chain.Entries, against)
	if chain.Head.Seq > 0 {
		fmt.Fprintf(stdout, "  head: seq %d hash %s\n", chain.Head.Seq, chain.Head.Hash)
	}
	return nil
}

// backupError says why a download failed, and what to do.
func backupError(base string, err error) error {
	var te *client.TransportError
	var ae *client.APIError
	switch {
	case errors.As(err, &te):
		return fmt.Errorf("store backup: no answer from %s: %v (is `countersign serve` running? `countersign ready` waits for it; with the server stopped, copy store.path and the signing key as they are)", base, te.Err)
	case errors.As(err, &ae):
		return fmt.Errorf("store backup: %s answered %d %s: %s", base, ae.Status, http.StatusText(ae.Status), ae.Message)
	}
	return fmt.Errorf("store backup: %w", err)
}

// checkBackup checks a backup file: bbolt's consistency check, then the
// audit chain in it under pub.
func checkBackup(ctx context.Context, path string, pub ed25519.PublicKey) (bolt.FileReport, approvals.Report, error) {
	file, err := bolt.CheckFile(path)
	if err != nil {
		return file, approvals.Report{}, err
	}
	db, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		return file, approvals.Report{}, err
	}
	defer db.Close()
	rep, err := approvals.VerifyWith(ctx, db, approvals.VerifyOptions{Trusted: []ed25519.PublicKey{pub}, StateBuckets: auditStateBuckets()})
	if err != nil {
		return file, rep, err
	}
	if !rep.Intact {
		return file, rep, fmt.Errorf("its audit chain is BROKEN at seq %d: %s", rep.BrokenAt, rep.Reason)
	}
	return file, rep, nil
}

// cmdStoreRestore runs `store restore`: it checks a backup file (bbolt's
// consistency check, then its audit chain under the configured signing
// key) and copies it to store.path, which must not exist: a restore makes
// a new store, never writes over one. The server must be stopped.
func cmdStoreRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("store restore", stderr)
	load := configFlag(fs)
	from := fs.String("from", "", "the backup file written by `store backup` (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *from == "" {
		return errors.New("store restore: --from FILE is required (a file `countersign store backup` wrote)")
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if cfg.Store.Engine != config.EngineBolt {
		return fmt.Errorf("store restore: store.engine is %s; restore a PostgreSQL database with pg_restore (docs/operations.md, \"Backups\")", cfg.Store.Engine)
	}
	dst := cfg.Store.Path
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("store restore: store.path %s already exists; a restore makes a new store: stop the server and move the old file aside first (keep it until the restored store verifies)", dst)
	}
	if dir := filepath.Dir(dst); !fileExists(dir) {
		return fmt.Errorf("store.path: the directory %s does not exist; create it (mkdir -p %s)", dir, dir)
	}
	pub, err := configuredPublicKey(cfg)
	if err != nil {
		return fmt.Errorf("store restore: %w (restore the signing key file from its backup first: the chain verifies only under it)", err)
	}
	file, chain, err := checkBackup(ctx, *from, pub)
	if err != nil {
		return fmt.Errorf("store restore: %s is not a good backup for this config, and nothing was written: %w", *from, err)
	}
	if err := bolt.CopyNew(*from, dst); err != nil {
		return fmt.Errorf("store restore: %w", err)
	}
	fmt.Fprintf(stdout, "✓ Restored %s to %s (%d keys in %d buckets). Audit chain INTACT — %d entries verified.\n", *from, dst, file.Keys, file.Buckets, chain.Entries)
	if chain.Head.Seq > 0 {
		fmt.Fprintf(stdout, "  head: seq %d hash %s\n", chain.Head.Seq, chain.Head.Hash)
	}
	// serve checks the chain against the newest anchor: an older backup
	// is a rollback, and serve refuses it until the operator says so.
	db, err := bolt.Open(dst, bolt.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := checkAnchors(cfg, db); err != nil {
		fmt.Fprintf(stdout, "⚠ serve will refuse this store until you act: %v\n", err)
	}
	return nil
}
