package approvals

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/kv"
)

func verifyWith(t *testing.T, db kv.Store, o VerifyOptions) Report {
	t.Helper()
	rep, err := VerifyWith(context.Background(), db, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestGenesisRecordIsWrittenWithTheFirstEntry(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		db := openStore(t)
		key := testKey(1)
		err := db.Update(context.Background(), func(tx kv.Tx) error {
			if wrapped {
				tx = plainTx{tx}
			}
			_, err := Append(tx, key, t0, Entry{Action: "first"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, db, key, 2)
		var g GenesisRecord
		var ok bool
		var first Entry
		_ = db.View(context.Background(), func(tx kv.Tx) error {
			g, ok, err = GenesisOf(tx)
			return err
		})
		es := exportEntries(t, db)
		first = es[0]
		if pub, good := g.verify(); !ok || !good || g.Hash != first.Hash || g.Created != "2026-09-26T12:20:13Z" || !pub.Equal(key.Public().(ed25519.PublicKey)) {
			t.Fatalf("wrapped=%v: genesis %+v ok=%v, want a genesis signed by the test key, created %q, naming the first entry %s", wrapped, g, ok, "2026-09-26T12:20:13Z", first.Hash)
		}
		rep := verify(t, db, key.Public().(ed25519.PublicKey))
		if !rep.Intact || rep.Genesis != g.Created {
			t.Fatalf("report %+v, want intact with genesis %q", rep, g.Created)
		}
		// The genesis names the first entry: another first entry breaks it.
		putRow(t, db, bucketAuditHead, []byte(keyGenesis), []byte(`{"created":"x","hash":"`+strings.Repeat("a", 64)+`","key":"`+g.Key+`","sig":"00"}`))
		if rep := verify(t, db, key.Public().(ed25519.PublicKey)); rep.Intact || rep.BrokenAt != 1 || rep.Reason != ReasonGenesis {
			t.Fatalf("replaced genesis: %+v, want broken at 1: %q", rep, ReasonGenesis)
		}
	}
}

func exportEntries(t *testing.T, db kv.Store) []Entry {
	t.Helper()
	var out []Entry
	err := db.View(context.Background(), func(tx kv.Tx) error {
		es, err := List(tx, Filter{Limit: 1 << 20})
		for i := len(es) - 1; i >= 0; i-- {
			out = append(out, es[i])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEmptiedChainIsBroken(t *testing.T) {
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	db := openStore(t)
	putRow(t, db, "principals", []byte("p1"), []byte("{}"))
	o := VerifyOptions{Trusted: []ed25519.PublicKey{pub}, StateBuckets: []string{"principals"}}
	if rep := verifyWith(t, db, o); rep.Intact || rep.BrokenAt != 1 || rep.Reason != ReasonEmptied {
		t.Fatalf("state without a chain: %+v, want broken at 1: %q", rep, ReasonEmptied)
	}
	// A new store (no state) is intact and empty; one whose rows and head
	// were wiped but whose genesis record remains is not.
	fresh := openStore(t)
	if rep := verifyWith(t, fresh, o); !rep.Intact || rep.Entries != 0 {
		t.Fatalf("new store: %+v, want intact with 0 entries", rep)
	}
	appendN(t, fresh, key, 3)
	for s := uint64(1); s <= 3; s++ {
		putRow(t, fresh, bucketAudit, kv.U64(s), nil)
	}
	putRow(t, fresh, bucketAuditHead, []byte("head"), nil)
	if rep := verifyWith(t, fresh, VerifyOptions{Trusted: []ed25519.PublicKey{pub}}); rep.Intact || rep.BrokenAt != 1 || rep.Reason != ReasonEmptied {
		t.Fatalf("wiped but for its genesis: %+v, want broken at 1: %q", rep, ReasonEmptied)
	}
	_ = fresh.View(context.Background(), func(tx kv.Tx) error {
		if e, err := Emptied(tx, nil); !e || err != nil {
			t.Errorf("Emptied = %v %v, want true, no error", e, err)
		}
		return nil
	})
}

func TestAnchorsCatchRollbackReplacementAndResigning(t *testing.T) {
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	db := openStore(t)
	es := appendN(t, db, key, 6)
	a2 := SignAnchor(key, 2, es[1].Hash, t0)
	a2.Line = 1
	a5 := SignAnchor(key, 5, es[4].Hash, t0)
	a5.Line = 2
	o := VerifyOptions{Trusted: []ed25519.PublicKey{pub}, Anchors: []Anchor{a2, a5}}
	if rep := verifyWith(t, db, o); !rep.Intact || rep.Anchors != 2 || rep.NewestAnchor.Seq != 5 {
		t.Fatalf("intact: %+v, want intact with 2 anchors, the newest at seq 5", rep)
	}
	// An anchor beyond the end: rolled back.
	a9 := SignAnchor(key, 9, strings.Repeat("b", 64), t0)
	a9.Line = 3
	o.Anchors = []Anchor{a2, a5, a9}
	if rep := verifyWith(t, db, o); rep.Intact || rep.BrokenAt != 7 || !strings.HasPrefix(rep.Reason, "rolled back: the chain ends at seq 6, before the head anchored at line 3 of the anchor file (seq 9,") {
		t.Fatalf("rolled back: %+v, want broken at 7 with a reason starting %q", rep, "rolled back: the chain ends at seq 6, before the head anchored at line 3 of the anchor file (seq 9,")
	}
	// A different hash at an anchored seq: replaced.
	bad := SignAnchor(key, 5, strings.Repeat("c", 64), t0)
	bad.Line = 2
	o.Anchors = []Anchor{a2, bad}
	if rep := verifyWith(t, db, o); rep.Intact || rep.BrokenAt != 5 || !strings.Contains(rep.Reason, "the chain was replaced") {
		t.Fatalf("replaced: %+v, want broken at 5 with a reason saying %q", rep, "the chain was replaced")
	}
	// An anchor signed by another key than the chain's there.
	forged := SignAnchor(testKey(7), 2, es[1].Hash, t0)
	forged.Line = 1
	o.Anchors = []Anchor{forged}
	if rep := verifyWith(t, db, o); rep.Intact || rep.BrokenAt != 2 || !strings.Contains(rep.Reason, "re-signed") {
		t.Fatalf("re-signed: %+v, want broken at 2 with a reason saying %q", rep, "re-signed")
	}
	// CheckAnchor (the start-up check) agrees on the newest anchor.
	_ = db.View(context.Background(), func(tx kv.Tx) error {
		if err := CheckAnchor(tx, a5); err != nil {
			t.Errorf("good anchor: %v", err)
		}
		if err := CheckAnchor(tx, a9); err == nil || !strings.Contains(err.Error(), "ends at seq 6") {
			t.Errorf("beyond: %v, want an error saying %q", err, "ends at seq 6")
		}
		if err := CheckAnchor(tx, bad); err == nil || !strings.Contains(err.Error(), "replaced") {
			t.Errorf("replaced: %v, want an error saying %q", err, "replaced")
		}
		return nil
	})
}

func TestAnchorFileRoundTrip(t *testing.T) {
	key := testKey(1)
	db := openStore(t)
	path := filepath.Join(t.TempDir(), "sub", "audit.anchors")
	anc := NewAnchorer(db, key, path, func() time.Time { return t0 }, Anchor{})
	if _, wrote, err := anc.Anchor(context.Background()); wrote || err != nil {
		t.Fatalf("empty chain anchored: wrote=%v err=%v, want nothing written, no error", wrote, err)
	}
	es := appendN(t, db, key, 3)
	a, wrote, err := anc.Anchor(context.Background())
	if err != nil || !wrote || a.Seq != 3 || a.Hash != es[2].Hash || a.KeyID != hex.EncodeToString(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("anchor: %+v wrote=%v err=%v, want one written at seq 3 with hash %s by key %s, no error", a, wrote, err, es[2].Hash, hex.EncodeToString(key.Public().(ed25519.PublicKey)))
	}
	if _, wrote, _ := anc.Anchor(context.Background()); wrote {
		t.Fatal("an unchanged head was anchored twice")
	}
	appendN(t, db, key, 1)
	if _, wrote, err := anc.Anchor(context.Background()); !wrote || err != nil {
		t.Fatalf("moved head: wrote=%v err=%v, want written, no error", wrote, err)
	}
	got, err := ReadAnchors(path)
	if err != nil || len(got) != 2 || got[0].Line != 1 || got[1].Seq != 4 || !got[1].signedBy(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("read back: %+v %v, want 2 anchors, the first at line 1, the second at seq 4 signed by the test key", got, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v, want mode 0600", fi, err)
	}
	// A head the key did not sign is never anchored.
	other := NewAnchorer(db, testKey(2), path, nil, Anchor{})
	if _, _, err := other.Anchor(context.Background()); err == nil || !strings.Contains(err.Error(), "not signed by this server's key") {
		t.Fatalf("foreign key: %v, want an error saying %q", err, "not signed by this server's key")
	}
	if _, err := parseAnchors(strings.NewReader("\n{\"seq\":1}\n"), "f"); err == nil || !strings.Contains(err.Error(), "line 2: not an anchor") {
		t.Fatalf("bad line: %v, want an error saying %q", err, "line 2: not an anchor")
	}
}

func TestKeyRotationVerifies(t *testing.T) {
	k1, k2 := testKey(1), testKey(2)
	p1, p2 := k1.Public().(ed25519.PublicKey), k2.Public().(ed25519.PublicKey)
	db := openStore(t)
	appendN(t, db, k1, 3)
	err := db.Update(context.Background(), func(tx kv.Tx) error {
		_, err := RotateKey(tx, k2, t0, p1, "countersign [system]", "test")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, db, k2, 2)
	rep := verify(t, db, p2)
	if !rep.Intact || rep.Entries != 6 || len(rep.Keys) != 2 || rep.Keys[0] != (KeySpan{hex.EncodeToString(p1), 1, 3}) || rep.Keys[1] != (KeySpan{hex.EncodeToString(p2), 4, 6}) {
		t.Fatalf("rotated chain with the new key: %+v, want intact, 6 entries, keys %+v and %+v", rep, KeySpan{hex.EncodeToString(p1), 1, 3}, KeySpan{hex.EncodeToString(p2), 4, 6})
	}
	if rep := verify(t, db, p1); rep.Intact || rep.BrokenAt != 4 || rep.Reason != ReasonUntrustedKey {
		t.Fatalf("old key only: %+v, want broken at 4: %q", rep, ReasonUntrustedKey)
	}
	if rep := verifyWith(t, db, VerifyOptions{Trusted: []ed25519.PublicKey{p1, p2}}); !rep.Intact {
		t.Fatalf("both: %+v, want intact", rep)
	}
	_ = db.View(context.Background(), func(tx kv.Tx) error {
		ks, err := Keys(tx, p2)
		if err != nil || len(ks) != 2 || ks[0].To != 3 || ks[1].From != 4 || ks[1].To != 6 {
			t.Errorf("Keys = %+v %v, want 2 spans, seq 1-3 and 4-6", ks, err)
		}
		return nil
	})
	// A rotation that does not start from the chain's key breaks it.
	db2 := openStore(t)
	appendN(t, db2, k1, 2)
	_ = db2.Update(context.Background(), func(tx kv.Tx) error {
		_, err := RotateKey(tx, k2, t0, testKey(5).Public().(ed25519.PublicKey), "x", "")
		return err
	})
	if rep := verify(t, db2, p1); rep.Intact || rep.BrokenAt != 3 || rep.Reason != ReasonRotation {
		t.Fatalf("rotation from a stranger: %+v, want broken at 3: %q", rep, ReasonRotation)
	}
}

// TestReadLastAnchorReadsTheEnd: the last anchor of a file longer than the
// tail it reads, of a file of one line, none of an empty file, and an
// error naming the last line when it is not an anchor.
func TestReadLastAnchorReadsTheEnd(t *testing.T) {
	key := testKey(3)
	path := filepath.Join(t.TempDir(), "audit.anchors")
	hash := strings.Repeat("ab", 32)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ReadLastAnchor(path); ok || err != nil {
		t.Fatalf("an empty file: ok %v, err %v; want none", ok, err)
	}
	for seq := uint64(1); seq <= 600; seq++ { // about 150 KiB, more than the tail
		if err := AppendAnchor(path, SignAnchor(key, seq, hash, t0)); err != nil {
			t.Fatal(err)
		}
		if seq == 1 {
			if a, ok, err := ReadLastAnchor(path); err != nil || !ok || a.Seq != 1 {
				t.Fatalf("one line: %+v ok=%v err=%v, want the anchor at seq 1", a, ok, err)
			}
		}
	}
	if st, _ := os.Stat(path); st.Size() <= anchorTail {
		t.Fatalf("the file is %d bytes, want more than the tail's %d", st.Size(), anchorTail)
	}
	a, ok, err := ReadLastAnchor(path)
	if err != nil || !ok || a.Seq != 600 || !a.signedBy(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("the last of 600: %+v ok=%v err=%v, want the anchor at seq 600 signed by the test key", a, ok, err)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{\"seq\": 1, \"note\": \"edited\"}\n")
	f.Close()
	if _, _, err := ReadLastAnchor(path); err == nil || !strings.Contains(err.Error(), "last line: not an anchor") {
		t.Fatalf("a last line that is not an anchor: %v, want an error saying %q", err, "last line: not an anchor")
	}
}
