package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/kv"
)

// TestBackupWhileWriting takes a backup while four writers commit, each its
// own numbered keys one at a time, on a store with group commit (as serve
// runs it). The copy passes bbolt's consistency check, holds every write
// acknowledged before the backup began, and is one moment of the store:
// for each writer the keys in it are 0..k with no gap (a snapshot never
// holds a write without the writes acknowledged before it).
func TestBackupWhileWriting(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(filepath.Join(dir, "cs.db"), Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	const writers = 4
	var acked [writers]atomic.Int64 // per writer: how many writes are acknowledged
	stop := make(chan struct{})
	var wg sync.WaitGroup
	val := bytes.Repeat([]byte("v"), 512)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Appendf(nil, "w%d-%08d", w, i)
				if err := db.Update(ctx, func(tx kv.Tx) error { return tx.Put("writes", key, val) }); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				acked[w].Store(int64(i + 1))
			}
		}()
	}
	// Let every writer commit some, then note what is acknowledged.
	for w := range writers {
		for acked[w].Load() < 50 {
			if t.Failed() {
				t.FailNow()
			}
			time.Sleep(time.Millisecond) // pacing only: nothing is timed
		}
	}
	var before [writers]int64
	for w := range writers {
		before[w] = acked[w].Load()
	}
	path := filepath.Join(dir, "backup.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var announced int64
	n, err := db.Backup(ctx, f, func(size int64) error { announced = size; return nil })
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if n != announced || n == 0 {
		t.Errorf("Backup wrote %d bytes and announced %d; want the same, non-zero", n, announced)
	}
	rep, err := CheckFile(path)
	if err != nil {
		t.Fatalf("CheckFile of the backup: %v", err)
	}
	if rep.Size != n || rep.Buckets != 1 {
		t.Errorf("CheckFile: %+v, want %d bytes and one bucket", rep, n)
	}
	copyDB, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer copyDB.Close()
	var count [writers]int64
	var problems []string
	err = copyDB.View(ctx, func(tx kv.Tx) error {
		return tx.Ascend("writes", nil, nil, func(k, _ []byte) error {
			var w int
			var i int64
			if _, err := fmt.Sscanf(string(k), "w%d-%d", &w, &i); err != nil {
				return err
			}
			if i != count[w] {
				problems = append(problems, fmt.Sprintf("writer %d: key %d follows key %d", w, i, count[w]-1))
			}
			count[w] = i + 1
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		if count[w] < before[w] {
			problems = append(problems, fmt.Sprintf("writer %d: %d writes were acknowledged before the backup began, the backup holds %d", w, before[w], count[w]))
		}
	}
	if len(problems) > 0 {
		t.Errorf("the backup is not one moment of the store:\n%s", strings.Join(problems, "\n"))
	}
}

// TestBackupStops: an error from size ends the backup before any byte, and
// so does a cancelled context; a failing writer's error is returned.
func TestBackupStops(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "cs.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.Update(ctx, func(tx kv.Tx) error { return tx.Put("b", []byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	refused := errors.New("no room")
	if n, err := db.Backup(ctx, &buf, func(int64) error { return refused }); !errors.Is(err, refused) || n != 0 || buf.Len() != 0 {
		t.Errorf("size refused: got %d bytes written (%d buffered), %v; want none and %v", n, buf.Len(), err, refused)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if n, err := db.Backup(cctx, &buf, nil); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("cancelled: got %d bytes, %v; want none and context.Canceled", n, err)
	}
	// bbolt wraps the writer's error in text ("meta 0 copy: disk full").
	if _, err := db.Backup(ctx, failingWriter{errors.New("disk full")}, nil); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("failing writer: got %v, want its error, disk full", err)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

// TestCheckFileRefusesABrokenCopy: a backup cut short, one with pages in
// use overwritten, and a file that is not a store all fail CheckFile.
func TestCheckFileRefusesABrokenCopy(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(filepath.Join(dir, "cs.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	val := bytes.Repeat([]byte("x"), 1024)
	if err := db.Update(context.Background(), func(tx kv.Tx) error {
		for i := range 300 {
			if err := tx.Put("b", kv.U64(uint64(i)), val); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var full bytes.Buffer
	if _, err := db.Backup(context.Background(), &full, nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	good := filepath.Join(dir, "good.db")
	if err := os.WriteFile(good, full.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if rep, err := CheckFile(good); err != nil || rep.Keys != 300 {
		t.Fatalf("CheckFile of a good copy: %+v, %v; want 300 keys and no error", rep, err)
	}
	pageSize := os.Getpagesize()
	overwritten := bytes.Clone(full.Bytes())
	// The pages after the two meta pages: the leaves, all in use.
	for i := 2 * pageSize; i < len(overwritten)/2; i++ {
		overwritten[i] = 0xff
	}
	for name, content := range map[string][]byte{
		"cut short":         full.Bytes()[:full.Len()/2],
		"pages overwritten": overwritten,
		"not a store":       []byte("this is a text file, not a store\n"),
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
			if err := os.WriteFile(p, content, 0o600); err != nil {
				t.Fatal(err)
			}
			if rep, err := CheckFile(p); err == nil {
				t.Errorf("CheckFile of a copy %s: %+v and no error; want an error", name, rep)
			}
		})
	}
}
