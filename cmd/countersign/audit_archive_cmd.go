package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/config"
)

// auditArchive runs `audit archive`: the live entries older than before
// (all but the newest) are written to a new segment file, synced, and
// replaced in the store by a signed checkpoint. The server must be stopped.
func auditArchive(ctx context.Context, cfg *config.Config, getenv func(string) string, before, out string, stdout io.Writer) error {
	if before == "" || out == "" {
		return errors.New("--before DATE and --out FILE are both required\n" + auditUsage)
	}
	cutoff, err := parseDate(before)
	if err != nil {
		return err
	}
	key, err := configuredSigningKey(cfg)
	if err != nil {
		return err
	}
	opts := approvals.VerifyOptions{Trusted: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, StateBuckets: auditStateBuckets()}
	if p := cfg.Audit.Anchor.File; p != "" {
		anchors, err := approvals.ReadAnchors(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit.anchor.file: %w", err)
		}
		opts.Anchors = anchors
	}
	db, err := openEngine(ctx, cfg, getenv, false)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := approvals.ArchiveToFile(ctx, db, key, opts, cutoff, time.Now(), out)
	switch {
	case errors.Is(err, approvals.ErrNothingToArchive):
		return fmt.Errorf("--before %s: %w", before, err)
	case err != nil:
		return err
	}
	s := res.Segment
	fmt.Fprintf(stdout, "Archived seq %d–%d (%d entries) to %s; the store keeps a signed checkpoint at seq %d.\n", s.From, s.To, s.To-s.From+1, out, s.To)
	fmt.Fprintf(stdout, "Keep the file: countersign audit verify --archive %s checks the whole history.\n", out)
	return nil
}

// parseDate reads --before: a date (midnight UTC) or an RFC 3339 time.
func parseDate(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--before: %q is not a date (2026-01-31) or an RFC 3339 time (2026-01-31T00:00:00Z)", s)
}
