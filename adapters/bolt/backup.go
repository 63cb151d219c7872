package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"
)

// Backup writes a consistent copy of the whole store to w while the store
// stays open for reads and writes: the snapshot of one read transaction
// (bbolt's Tx.WriteTo), a complete store file that a restore puts at
// store.path. Every write committed before Backup began is in the copy;
// none committed after is, and no write is ever half in it.
//
// size, when set, is called first with the copy's length in bytes (to
// announce it, as an HTTP Content-Length); an error from it ends the backup
// before any byte is written. A cancelled ctx ends it at the next write.
//
// Writes go on during the copy. A write that must grow the file waits
// until the copy ends (bbolt remaps the file only when no read transaction
// is open), and pages freed during the copy are reused only after it, so
// the file may grow by what was written meanwhile.
func (d *DB) Backup(ctx context.Context, w io.Writer, size func(int64) error) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := d.Err(); err != nil {
		return 0, err
	}
	var n int64
	err := d.db.View(func(tx *bbolt.Tx) error {
		if size != nil {
			if err := size(tx.Size()); err != nil {
				return err
			}
		}
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx, w})
		return err
	})
	return n, err
}

// ctxWriter fails its writes once ctx is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// FileReport says what CheckFile found in a store file.
type FileReport struct {
	Size    int64 // bytes
	Buckets int   // top-level buckets
	Keys    int   // keys in them
}

// CheckFile opens the store file at path read-only and checks its
// structure (bbolt's consistency check: every page reachable once, the
// freelist, the branch and leaf pages in order). A file cut short or
// corrupted fails it; a file being written by a running server is refused
// with ErrLocked. A file so damaged that bbolt panics reading it fails it
// too, with an error rather than the panic.
func CheckFile(path string) (rep FileReport, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s is damaged: reading it failed (%v)", path, r)
		}
	}()
	st, err := os.Stat(path)
	if err != nil {
		return rep, err
	}
	rep.Size = st.Size()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bberrors.ErrTimeout) {
			return rep, fmt.Errorf("open %s: %w", path, ErrLocked)
		}
		return rep, fmt.Errorf("%s is not a complete store file: %w", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		var problems []error
		for err := range tx.Check() { // read to the end: the check runs until then
			if len(problems) < 10 {
				problems = append(problems, err)
			}
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s fails the consistency check: %w", path, errors.Join(problems...))
		}
		return tx.ForEach(func(_ []byte, b *bbolt.Bucket) error {
			rep.Buckets++
			rep.Keys += b.Stats().KeyN
			return nil
		})
	})
	return rep, err
}
