package approvals

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/kv"
)

// syncBuf is an in-memory SyncWriter.
type syncBuf struct {
	bytes.Buffer
	synced bool
}

func (s *syncBuf) Sync() error { s.synced = true; return nil }

// appendDays appends one entry a day from day from to day to (t0 + days).
func appendDays(t *testing.T, db kv.Store, key ed25519.PrivateKey, from, to int) {
	t.Helper()
	for d := from; d <= to; d++ {
		err := db.Update(context.Background(), func(tx kv.Tx) error {
			_, err := Append(tx, key, t0.Add(time.Duration(d)*24*time.Hour), Entry{Principal: "ops [prin_1]", UserID: "patient_42", Action: "remember", Detail: fmt.Sprintf("day %d", d)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func readSeg(t *testing.T, b *syncBuf) Segment {
	t.Helper()
	s, err := ReadSegment(bytes.NewReader(b.Bytes()), "seg")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A store aged with a settable clock (one entry a day): archiving moves the
// old days out into a segment that verifies on its own, the store keeps a
// checkpoint, the live chain verifies from it, and the whole history
// verifies given the segments; a second archive continues from the first.
func TestArchiveMovesOldEntriesOutAndVerifies(t *testing.T) {
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	trusted := []ed25519.PublicKey{pub}
	db := openStore(t)
	appendDays(t, db, key, 0, 5) // seqs 1..6, days 0..5
	anchor := SignAnchor(key, 2, exportEntries(t, db)[1].Hash, t0)
	anchor.Line = 1
	o := VerifyOptions{Trusted: trusted, Anchors: []Anchor{anchor}}

	var seg1 syncBuf
	res, err := Archive(context.Background(), db, key, o, t0.Add(60*time.Hour), t0.Add(10*24*time.Hour), &seg1)
	if err != nil || !seg1.synced || res.Segment.From != 1 || res.Segment.To != 3 || res.Checkpoint.Seq != 3 {
		t.Fatalf("archive: %+v %v (synced %v), want segment 1-3, checkpoint at 3, synced, no error", res, err, seg1.synced)
	}
	if rows := exportEntries(t, db); len(rows) != 3 || rows[0].Seq != 4 {
		t.Fatalf("live rows after the archive: %+v, want 3 rows from seq 4", rows)
	}
	// The live chain, from the checkpoint (the anchor at an archived seq is
	// not checked without the archive; one beyond the end still would be).
	if rep := verifyWith(t, db, o); !rep.Intact || rep.Entries != 3 || rep.Checkpoint != 3 {
		t.Fatalf("live chain: %+v, want intact, 3 entries, checkpoint 3", rep)
	}
	s1 := readSeg(t, &seg1)
	// The whole history.
	o.Archives = []Segment{s1}
	if rep := verifyWith(t, db, o); !rep.Intact || rep.Entries != 6 {
		t.Fatalf("with the archive: %+v, want intact with 6 entries", rep)
	}

	// A second archive continues where the first ended.
	appendDays(t, db, key, 6, 7)
	var seg2 syncBuf
	if res, err := Archive(context.Background(), db, key, o, t0.Add(6*24*time.Hour+time.Hour), t0.Add(11*24*time.Hour), &seg2); err != nil || res.Segment.From != 4 || res.Segment.To != 7 {
		t.Fatalf("second archive: %+v %v, want segment 4-7, no error", res, err)
	}
	s2 := readSeg(t, &seg2)
	o.Archives = []Segment{s1, s2}
	if rep := verifyWith(t, db, o); !rep.Intact || rep.Entries != 8 || rep.Checkpoint != 7 {
		t.Fatalf("with both archives: %+v, want intact, 8 entries, checkpoint 7", rep)
	}
	// A missing segment, a segment out of order, an altered archived entry.
	for name, tt := range map[string]struct {
		archives []Segment
		at       uint64
		reason   string
	}{
		"first segment missing":  {[]Segment{s2}, 4, ReasonArchive},
		"segments out of order":  {[]Segment{s2, s1}, 4, ReasonArchive},
		"archived entry altered": {[]Segment{alter(t, s1, 1, "day 1", "day X"), s2}, 2, ReasonTampered},
	} {
		o.Archives = tt.archives
		if rep := verifyWith(t, db, o); rep.Intact || rep.BrokenAt != tt.at || rep.Reason != tt.reason {
			t.Errorf("%s: %+v, want broken at %d: %s", name, rep, tt.at, tt.reason)
		}
	}
	// The newest entry always stays; nothing older than the date: refused.
	o.Archives = nil
	var none syncBuf
	if _, err := Archive(context.Background(), db, key, o, t0.Add(100*24*time.Hour), t0, &none); !errors.Is(err, ErrNothingToArchive) {
		t.Fatalf("archive of everything but the newest again: %v, want ErrNothingToArchive", err)
	}
	// A broken chain is not archived.
	putRow(t, db, bucketAudit, kv.U64(8), nil)
	if _, err := Archive(context.Background(), db, key, o, t0.Add(100*24*time.Hour), t0, &none); err == nil || !strings.Contains(err.Error(), "BROKEN") {
		t.Fatalf("archive of a broken chain: %v, want an error saying %q", err, "BROKEN")
	}
}

// alter returns s with the entry at index i's text replaced (not rehashed).
func alter(t *testing.T, s Segment, i int, from, to string) Segment {
	t.Helper()
	c := s
	c.Entries = append([][]byte(nil), s.Entries...)
	if !bytes.Contains(c.Entries[i], []byte(from)) {
		t.Fatalf("entry %d has no %q", i, from)
	}
	c.Entries[i] = bytes.Replace(c.Entries[i], []byte(from), []byte(to), 1)
	return c
}

// TestArchiveToFile: an existing file is refused and left as it is, with
// every entry kept; nothing to archive leaves no file behind; an archive
// writes a new segment (mode 0600) that reads back with the entries moved.
func TestArchiveToFile(t *testing.T) {
	key := testKey(1)
	o := VerifyOptions{Trusted: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	db := openStore(t)
	appendDays(t, db, key, 0, 5)
	ctx, dir := context.Background(), t.TempDir()
	taken := filepath.Join(dir, "taken.seg")
	if err := os.WriteFile(taken, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	cut := t0.Add(3 * 24 * time.Hour)
	if _, err := ArchiveToFile(ctx, db, key, o, cut, t0, taken); err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Fatalf("onto an existing file: %v, want it refused", err)
	}
	if b, _ := os.ReadFile(taken); string(b) != "keep me" || len(exportEntries(t, db)) != 6 {
		t.Fatalf("after the refusal the file holds %q and the store %d entries, want both untouched", b, len(exportEntries(t, db)))
	}
	none := filepath.Join(dir, "none.seg")
	if _, err := ArchiveToFile(ctx, db, key, o, t0, t0, none); !errors.Is(err, ErrNothingToArchive) {
		t.Fatalf("nothing older than the first entry: %v, want ErrNothingToArchive", err)
	}
	if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed archive left %s behind (%v)", none, err)
	}
	out := filepath.Join(dir, "2026.seg")
	res, err := ArchiveToFile(ctx, db, key, o, cut, t0, out)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := ReadSegmentFiles([]string{out})
	if err != nil || len(segs) != 1 || segs[0].Header.From != 1 || segs[0].Header.To != res.Segment.To || res.Segment.To != 3 {
		t.Fatalf("the segment read back: %+v %v, want seq 1–3 (the result says %+v)", segs, err, res.Segment)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Fatalf("the segment's mode is %v, want 0600", st.Mode().Perm())
	}
}
