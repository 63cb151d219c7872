package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"
)

// compactTxSize bounds the bytes copied per transaction of a compaction,
// so that a large store is copied without holding it all in memory.
const compactTxSize = 64 << 20

// CompactReport says what a compaction did.
type CompactReport struct {
	Path          string
	Before, After int64 // file sizes in bytes
	Buckets       int   // top-level buckets copied
	Keys          int   // keys copied
	Took          time.Duration
}

// Compact rewrites the store at path into a new file holding only its live
// pages, packed full (bbolt's Compact), and puts the new file in its place.
// It is offline: it holds the store's lock from start to end, so it fails
// with ErrLocked, changing nothing, while a server (or any other process)
// has the store open, and no server can open it until it is done.
//
// The old file stays where it is until the new one is complete, checked
// (every bucket with the same number of keys and the same sequence) and
// synced to disk; then one rename replaces it and the directory is synced.
// A crash or an error at any point before the rename leaves the old file
// untouched (a partial new file is removed; one left by a crash is named
// path.compact-* and may be deleted).
func Compact(path string, lockTimeout time.Duration) (CompactReport, error) {
	start := time.Now()
	rep := CompactReport{Path: path}
	st, err := os.Stat(path)
	if err != nil {
		return rep, fmt.Errorf("compact: %w", err)
	}
	rep.Before = st.Size()
	if lockTimeout <= 0 {
		lockTimeout = time.Second
	}
	// Read-write: the exclusive lock keeps every server out until the new
	// file is in place.
	src, err := bbolt.Open(path, st.Mode().Perm(), &bbolt.Options{Timeout: lockTimeout, FreelistType: bbolt.FreelistArrayType})
	if err != nil {
		if errors.Is(err, bberrors.ErrTimeout) {
			return rep, fmt.Errorf("compact %s: %w (a countersign server or another command has it open; compaction is offline: stop the server, run compact, start it again)", path, ErrLocked)
		}
		return rep, fmt.Errorf("compact: open %s: %w", path, err)
	}
	defer src.Close()

	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".compact-*")
	if err != nil {
		return rep, fmt.Errorf("compact: the new file: %w", err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	done := false
	defer func() {
		if !done {
			os.Remove(tmpPath)
		}
	}()
	if err := os.Chmod(tmpPath, st.Mode().Perm()); err != nil {
		return rep, fmt.Errorf("compact: %w", err)
	}
	// No fsync per copy transaction: the whole file is synced once, before
	// it replaces the old one.
	dst, err := bbolt.Open(tmpPath, st.Mode().Perm(), &bbolt.Options{NoSync: true, FreelistType: bbolt.FreelistArrayType})
	if err != nil {
		return rep, fmt.Errorf("compact: open the new file: %w", err)
	}
	closeDst := func() error {
		if dst == nil {
			return nil
		}
		err := dst.Close()
		dst = nil
		return err
	}
	defer closeDst()
	if err := bbolt.Compact(dst, src, compactTxSize); err != nil {
		return rep, fmt.Errorf("compact: copy: %w", err)
	}
	if rep.Buckets, rep.Keys, err = sameContents(src, dst); err != nil {
		return rep, fmt.Errorf("compact: the new file does not match the store, which is left as it was: %w", err)
	}
	if err := dst.Sync(); err != nil {
		return rep, fmt.Errorf("compact: sync the new file: %w", err)
	}
	if err := closeDst(); err != nil {
		return rep, fmt.Errorf("compact: close the new file: %w", err)
	}
	if err := syncFile(tmpPath); err != nil {
		return rep, fmt.Errorf("compact: sync the new file: %w", err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return rep, fmt.Errorf("compact: replace %s: %w", path, err)
	}
	done = true
	if err := syncFile(filepath.Dir(path)); err != nil {
		return rep, fmt.Errorf("compact: sync the directory of %s (the new file is in place): %w", path, err)
	}
	if st, err := os.Stat(path); err == nil {
		rep.After = st.Size()
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// sameContents checks that every top-level bucket of src is in dst with
// the same number of keys and the same sequence, and that dst has no other.
func sameContents(src, dst *bbolt.DB) (buckets, keys int, err error) {
	type shape struct {
		keys int
		seq  uint64
	}
	read := func(db *bbolt.DB) (map[string]shape, error) {
		out := map[string]shape{}
		err := db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
				out[string(name)] = shape{keys: b.Stats().KeyN, seq: b.Sequence()}
				return nil
			})
		})
		return out, err
	}
	a, err := read(src)
	if err != nil {
		return 0, 0, err
	}
	b, err := read(dst)
	if err != nil {
		return 0, 0, err
	}
	for name, s := range a {
		if b[name] != s {
			return 0, 0, fmt.Errorf("bucket %s: %d keys, sequence %d in the store; %d keys, sequence %d in the copy", name, s.keys, s.seq, b[name].keys, b[name].seq)
		}
		keys += s.keys
	}
	if len(a) != len(b) {
		return 0, 0, fmt.Errorf("the copy has %d buckets, the store %d", len(b), len(a))
	}
	return len(a), keys, nil
}

// syncFile fsyncs the file or directory at path.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
