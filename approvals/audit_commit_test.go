package approvals

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/countersign/countersign/kv"
)

// plainTx hides the store's kv.Finisher, as a wrapper would: Append then
// signs and writes at once.
type plainTx struct{ kv.Tx }

// TestManyAppendsInOneCommit: the entries of one transaction are each
// signed, linked in order, and the head is signed over the last of them;
// the same chain results whether the store signs at commit or at once.
func TestManyAppendsInOneCommit(t *testing.T) {
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	for _, wrapped := range []bool{false, true} {
		t.Run(fmt.Sprintf("wrapped=%v", wrapped), func(t *testing.T) {
			db := openStore(t)
			appendN(t, db, key, 2) // committed before: the batch links to them
			const n = 50
			var got []Entry
			err := db.Update(context.Background(), func(tx kv.Tx) error {
				if wrapped {
					tx = plainTx{tx}
				}
				got = got[:0]
				for i := 0; i < n; i++ {
					e, err := Append(tx, key, t0, Entry{Principal: "p [1]", UserID: "u", Action: "check_before_act", Detail: fmt.Sprintf("s%d: SAFE", i)})
					if err != nil {
						return err
					}
					got = append(got, e)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range got {
				if e.Seq != uint64(3+i) || (i > 0 && e.PrevHash != got[i-1].Hash) {
					t.Fatalf("entry %d: %+v, want seq %d linked to the entry before", i, e, 3+i)
				}
				// Rows are not signed: the head covers them.
				if e.Sig != "" {
					t.Fatalf("entry %d returned with sig %q (wrapped %v), want no sig", i, e.Sig, wrapped)
				}
			}
			rep := verify(t, db, pub)
			if !rep.Intact || rep.Entries != n+2 || rep.Head.Seq != n+2 || rep.Head.Hash != got[n-1].Hash {
				t.Fatalf("report = %+v, want intact, %d entries, head at seq %d with hash %s", rep, n+2, n+2, got[n-1].Hash)
			}
			// Each stored row holds the entry Append returned, and its hash
			// follows from its content and the row before it.
			for i := range got {
				seq := uint64(3 + i)
				e, err := DecodeRow(kv.U64(seq), rawRow(t, db, seq))
				if err != nil {
					t.Fatalf("row %d: %v", seq, err)
				}
				if e.PrevHash, err = rowHash(rawRow(t, db, seq-1)); err != nil || verifyEntry(pub, e) != nil || e != got[i] {
					t.Fatalf("row %d does not verify: %v\n%+v\n%+v", seq, err, e, got[i])
				}
			}
		})
	}
}

// TestRolledBackAppendsLeaveNothing: appends of a transaction that fails
// are not written, and the next commit links to the last committed entry.
func TestRolledBackAppendsLeaveNothing(t *testing.T) {
	db := openStore(t)
	key := testKey(1)
	es := appendN(t, db, key, 3)
	boom := errors.New("boom")
	err := db.Update(context.Background(), func(tx kv.Tx) error {
		for i := 0; i < 5; i++ {
			if _, err := Append(tx, key, t0, Entry{Action: "x", Detail: "rolled back"}); err != nil {
				return err
			}
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want %v", err, boom)
	}
	next := appendN(t, db, key, 1)[0]
	if next.Seq != 4 || next.PrevHash != es[2].Hash {
		t.Fatalf("the entry after a rollback = %+v, want seq 4 after %s", next, es[2].Hash)
	}
	if rep := verify(t, db, key.Public().(ed25519.PublicKey)); !rep.Intact || rep.Entries != 4 {
		t.Fatalf("report = %+v, want intact with 4 entries", rep)
	}
}

// TestAppendNeverSignsARowItDidNotWrite: a newest row rewritten in the file
// (content changed, rehashed) stays broken after later appends: the new
// entries link to the signed head's hash, not to the rewritten row, so no
// new head ever covers it.
func TestAppendNeverSignsARowItDidNotWrite(t *testing.T) {
	db := openStore(t)
	key := testKey(1)
	es := appendN(t, db, key, 3)
	forged := es[2]
	forged.Detail = "ADD nothing happened"
	forged.Hash = forged.ComputeHash()
	forged.Sig = ""
	b, _ := json.Marshal(forged)
	putRow(t, db, bucketAudit, kv.U64(3), b)
	// The head still names the real row 3, so the forgery's link breaks
	// whatever comes after; and no append signs it.
	appendN(t, db, key, 2)
	var e Entry
	if err := json.Unmarshal(rawRow(t, db, 3), &e); err != nil || e.Sig != "" {
		t.Fatalf("the forged row was re-signed: %+v %v, want no sig", e, err)
	}
	rep := verify(t, db, key.Public().(ed25519.PublicKey))
	if rep.Intact || rep.BrokenAt != 4 || rep.Reason != ReasonLink {
		t.Fatalf("report = %+v, want broken at 4: %s", rep, ReasonLink)
	}
}
