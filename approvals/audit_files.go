package approvals

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign/kv"
)

// This file holds what the audit commands and the server's start do with
// the files beside the store: the anchor file, archive segments and
// trusted keys given as hex.

// AnchorDisagreement is a chain that disagrees with the newest anchor of
// its anchor file: rolled back, truncated or replaced since. Err says how.
type AnchorDisagreement struct {
	Path string // the anchor file
	Err  error
}

func (e *AnchorDisagreement) Error() string { return e.Err.Error() }

// Unwrap returns how the chain disagrees.
func (e *AnchorDisagreement) Unwrap() error { return e.Err }

// CheckAnchorFile checks store's chain against the newest anchor in the
// anchor file at path (CheckAnchor) and returns that anchor; zero when
// the file does not exist yet or holds none. A file that cannot be read
// is an error; a chain that disagrees is an *AnchorDisagreement.
// Countersign does not append to a chain that disagrees with its anchors.
func CheckAnchorFile(ctx context.Context, store kv.Store, path string) (Anchor, error) {
	anchors, err := ReadAnchors(path)
	if errors.Is(err, os.ErrNotExist) {
		return Anchor{}, nil
	}
	if err != nil {
		return Anchor{}, err
	}
	newest, ok := Newest(anchors)
	if !ok {
		return Anchor{}, nil
	}
	if err := store.View(ctx, func(tx kv.Tx) error { return CheckAnchor(tx, newest) }); err != nil {
		return Anchor{}, &AnchorDisagreement{Path: path, Err: err}
	}
	return newest, nil
}

// CheckLastAnchor reads the last anchor of the stream at path (zero when
// there is none yet: ReadLastAnchor reads from the file's end, for the one
// stream a cluster's replicas share) and checks store's chain against it.
func CheckLastAnchor(ctx context.Context, store kv.Store, path string) (Anchor, error) {
	last, ok, err := ReadLastAnchor(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && !ok {
		return Anchor{}, nil
	}
	if err != nil {
		return Anchor{}, err
	}
	if err := store.View(ctx, func(tx kv.Tx) error { return CheckAnchor(tx, last) }); err != nil {
		return Anchor{}, err
	}
	return last, nil
}

// ReadSegmentFiles reads archive segment files (ReadSegment), oldest
// first as given.
func ReadSegmentFiles(paths []string) ([]Segment, error) {
	var out []Segment
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		s, err := ReadSegment(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// ParsePublicKeys reads Ed25519 public keys written in hex (as
// export_public_key and `countersign audit pubkey` print them), several
// separated by commas.
func ParsePublicKeys(list string) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for _, h := range strings.Split(list, ",") {
		b, err := hex.DecodeString(strings.TrimSpace(h))
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("want %d bytes of hex (64 characters) per key, as export_public_key prints it; several keys are separated by commas", ed25519.PublicKeySize)
		}
		out = append(out, b)
	}
	return out, nil
}

// ArchiveToFile is Archive into a new segment file at path, which must not
// exist (an archive is never overwritten). The file and its directory are
// synced before the store drops the entries; on any failure the file is
// removed and the store keeps every entry.
func ArchiveToFile(ctx context.Context, store kv.Store, key ed25519.PrivateKey, o VerifyOptions, before, now time.Time, path string) (ArchiveResult, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return ArchiveResult{}, fmt.Errorf("%w (an archive is never overwritten; name a new file)", err)
	}
	res, err := Archive(ctx, store, key, o, before, now, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return ArchiveResult{}, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return res, nil
}
