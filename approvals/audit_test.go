package approvals

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
)

var t0 = time.Date(2026, 9, 26, 12, 20, 13, 0, time.UTC)

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func openStore(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "audit.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// appendN appends n entries, alternating two users, and returns them.
func appendN(t *testing.T, db kv.Store, key ed25519.PrivateKey, n int) []Entry {
	t.Helper()
	var out []Entry
	for i := 0; i < n; i++ {
		user := []string{"patient_42", "patient_7"}[i%2]
		err := db.Update(context.Background(), func(tx kv.Tx) error {
			e, err := Append(tx, key, t0.Add(time.Duration(i)*time.Second), Entry{
				Principal: "ops [prin_1]", UserID: user, Action: "remember", Detail: fmt.Sprintf("ADD fact %d", i+1),
			})
			out = append(out, e)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func verify(t *testing.T, db kv.Store, pub ed25519.PublicKey) Report {
	t.Helper()
	rep, err := Verify(context.Background(), db, pub)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func rawRow(t *testing.T, db kv.Store, seq uint64) []byte {
	t.Helper()
	var v []byte
	err := db.View(context.Background(), func(tx kv.Tx) error {
		var err error
		v, err = tx.Get(bucketAudit, kv.U64(seq))
		return err
	})
	if err != nil || v == nil {
		t.Fatalf("row %d: %v, want a stored row", seq, err)
	}
	return v
}

func putRow(t *testing.T, db kv.Store, bucket string, key, val []byte) {
	t.Helper()
	err := db.Update(context.Background(), func(tx kv.Tx) error {
		if val == nil {
			return tx.Delete(bucket, key)
		}
		return tx.Put(bucket, key, val)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAppendBuildsAVerifiableChain(t *testing.T) {
	db := openStore(t)
	key := testKey(1)
	es := appendN(t, db, key, 5)
	if es[0].PrevHash != Genesis || es[0].Seq != 1 || es[0].TS != "2026-09-26T12:20:13Z" {
		t.Fatalf("first entry = %+v, want seq 1 after %s at %s", es[0], Genesis, "2026-09-26T12:20:13Z")
	}
	for i := 1; i < len(es); i++ {
		if es[i].PrevHash != es[i-1].Hash || es[i].Seq != uint64(i+1) {
			t.Fatalf("entry %d does not link to %d", i+1, i)
		}
	}
	rep := verify(t, db, key.Public().(ed25519.PublicKey))
	if !rep.Intact || rep.Entries != 5 || rep.Head.Seq != 5 || rep.Head.Hash != es[4].Hash {
		t.Fatalf("report = %+v, want intact, 5 entries, head at seq 5 with hash %s", rep, es[4].Hash)
	}
	// Another key's public half does not verify the chain.
	if rep := verify(t, db, testKey(2).Public().(ed25519.PublicKey)); rep.Intact || rep.BrokenAt != 1 || rep.Reason != ReasonSignature {
		t.Fatalf("wrong key: %+v, want broken at 1: %q", rep, ReasonSignature)
	}
}

func TestVerifyEmptyChainIsIntact(t *testing.T) {
	db := openStore(t)
	rep := verify(t, db, testKey(1).Public().(ed25519.PublicKey))
	if !rep.Intact || rep.Entries != 0 {
		t.Fatalf("report = %+v, want intact with 0 entries", rep)
	}
}

func TestVerifyFindsTheFirstBreak(t *testing.T) {
	key := testKey(1)
	other := testKey(9)
	tests := []struct {
		name    string
		tamper  func(t *testing.T, db kv.Store, es []Entry)
		at      uint64
		reason  string
		entries int // rows verified before the break was found
	}{
		{"one byte of a detail flipped", func(t *testing.T, db kv.Store, es []Entry) {
			v := rawRow(t, db, 3)
			i := bytes.Index(v, []byte("ADD fact 3"))
			v[i] = 'X'
			putRow(t, db, bucketAudit, kv.U64(3), v)
		}, 3, ReasonTampered, 2},
		{"row no longer JSON", func(t *testing.T, db kv.Store, es []Entry) {
			v := rawRow(t, db, 2)
			putRow(t, db, bucketAudit, kv.U64(2), v[:len(v)-1])
		}, 2, ReasonTampered, 1},
		{"newest row deleted", func(t *testing.T, db kv.Store, es []Entry) {
			putRow(t, db, bucketAudit, kv.U64(6), nil)
		}, 6, ReasonTruncated, 5},
		{"two newest rows deleted", func(t *testing.T, db kv.Store, es []Entry) {
			putRow(t, db, bucketAudit, kv.U64(6), nil)
			putRow(t, db, bucketAudit, kv.U64(5), nil)
		}, 5, ReasonTruncated, 4},
		{"middle row deleted", func(t *testing.T, db kv.Store, es []Entry) {
			putRow(t, db, bucketAudit, kv.U64(3), nil)
		}, 4, ReasonLink, 2},
		{"two rows swapped", func(t *testing.T, db kv.Store, es []Entry) {
			a, b := rawRow(t, db, 2), rawRow(t, db, 4)
			putRow(t, db, bucketAudit, kv.U64(2), b)
			putRow(t, db, bucketAudit, kv.U64(4), a)
		}, 2, ReasonLink, 1},
		{"row rewritten and rehashed without the key", func(t *testing.T, db kv.Store, es []Entry) {
			// Rows carry no signature: the next row's link catches it.
			e := es[3]
			e.Detail = "ADD nothing happened"
			e.Hash = e.ComputeHash()
			b, _ := json.Marshal(e)
			putRow(t, db, bucketAudit, kv.U64(4), b)
		}, 5, ReasonLink, 4},
		{"newest row rewritten and rehashed without the key", func(t *testing.T, db kv.Store, es []Entry) {
			// The signed head names the real newest row.
			e := es[5]
			e.Detail = "ADD nothing happened"
			e.Hash = e.ComputeHash()
			b, _ := json.Marshal(e)
			putRow(t, db, bucketAudit, kv.U64(6), b)
		}, 6, ReasonLink, 6},
		{"whole chain rewritten and rehashed without the key", func(t *testing.T, db kv.Store, es []Entry) {
			prev := Genesis
			for i, e := range es {
				e.Detail += " (rewritten)"
				e.PrevHash = prev
				e.Hash = e.ComputeHash()
				prev = e.Hash
				b, _ := json.Marshal(e)
				putRow(t, db, bucketAudit, kv.U64(uint64(i+1)), b)
			}
			h, _ := json.Marshal(Checkpoint{Seq: 6, Hash: prev, Sig: hex.EncodeToString(ed25519.Sign(other, headMessage(6, prev)))})
			putRow(t, db, bucketAuditHead, []byte("head"), h)
		}, 1, ReasonGenesis, 0},
		{"row re-signed with another key", func(t *testing.T, db kv.Store, es []Entry) {
			e := es[0]
			e.Sig = hex.EncodeToString(ed25519.Sign(other, entryMessage(e.Hash)))
			b, _ := json.Marshal(e)
			putRow(t, db, bucketAudit, kv.U64(1), b)
		}, 1, ReasonSignature, 0},
		{"row inserted under a foreign key", func(t *testing.T, db kv.Store, es []Entry) {
			putRow(t, db, bucketAudit, []byte("x"), []byte(`{}`))
		}, 7, ReasonLink, 6},
		{"head checkpoint forged", func(t *testing.T, db kv.Store, es []Entry) {
			h, _ := json.Marshal(Checkpoint{Seq: 6, Hash: es[5].Hash, Sig: hex.EncodeToString(ed25519.Sign(other, headMessage(6, es[5].Hash)))})
			putRow(t, db, bucketAuditHead, []byte("head"), h)
		}, 6, ReasonHeadSig, 6},
		{"head checkpoint removed", func(t *testing.T, db kv.Store, es []Entry) {
			putRow(t, db, bucketAuditHead, []byte("head"), nil)
		}, 6, ReasonHeadGone, 6},
		{"newest row and its checkpoint rolled back together", func(t *testing.T, db kv.Store, es []Entry) {
			// The forger cannot sign the older head, so rolling both back
			// leaves a checkpoint whose signature does not cover it.
			putRow(t, db, bucketAudit, kv.U64(6), nil)
			h, _ := json.Marshal(Checkpoint{Seq: 5, Hash: es[4].Hash, Sig: hex.EncodeToString(ed25519.Sign(other, headMessage(5, es[4].Hash)))})
			putRow(t, db, bucketAuditHead, []byte("head"), h)
		}, 5, ReasonHeadSig, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openStore(t)
			es := appendN(t, db, key, 6)
			tt.tamper(t, db, es)
			rep := verify(t, db, key.Public().(ed25519.PublicKey))
			if rep.Intact || rep.BrokenAt != tt.at || rep.Reason != tt.reason {
				t.Fatalf("report = %+v, want broken at %d: %s", rep, tt.at, tt.reason)
			}
			if rep.Entries != tt.entries {
				t.Fatalf("entries verified = %d, want %d", rep.Entries, tt.entries)
			}
		})
	}
}

func TestVerifyCrossesBatches(t *testing.T) {
	db := openStore(t)
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	const batch = 4
	appendN(t, db, key, 2*batch+3)
	for _, b := range []int{1, batch, 2*batch + 3, 100} { // also a batch that ends exactly at the last row
		rep, err := verifyBatched(context.Background(), db, VerifyOptions{Trusted: []ed25519.PublicKey{pub}}, b)
		if err != nil || !rep.Intact || rep.Entries != 2*batch+3 || rep.Head.Seq != 2*batch+3 {
			t.Fatalf("batch %d: %+v %v, want intact, %d entries, head at seq %d, no error", b, rep, err, 2*batch+3, 2*batch+3)
		}
	}
	// A break past the first batch is found at its own sequence number.
	putRow(t, db, bucketAudit, kv.U64(2*batch+2), nil)
	rep, err := verifyBatched(context.Background(), db, VerifyOptions{Trusted: []ed25519.PublicKey{pub}}, batch)
	if err != nil || rep.Intact || rep.BrokenAt != 2*batch+3 || rep.Reason != ReasonLink || rep.Entries != 2*batch+1 {
		t.Fatalf("report = %+v %v, want broken at %d: %q after %d entries, no error", rep, err, 2*batch+3, ReasonLink, 2*batch+1)
	}
	var buf bytes.Buffer
	got, err := exportBatched(context.Background(), db, &buf, batch)
	if err != nil || got != 2*batch+2 || strings.Count(buf.String(), "\n") != 2*batch+3 { // and the head
		t.Fatalf("export wrote %d rows on %d lines (%v), want %d rows and the head on %d lines", got, strings.Count(buf.String(), "\n"), err, 2*batch+2, 2*batch+3)
	}
	var whole bytes.Buffer
	if _, err := Export(context.Background(), db, &whole); err != nil || whole.String() != buf.String() {
		t.Fatalf("batched and whole exports differ (%v)", err)
	}
}

func TestListNewestFirstWithFilters(t *testing.T) {
	db := openStore(t)
	key := testKey(1)
	appendN(t, db, key, 7) // odd seqs patient_42, even patient_7
	list := func(f Filter) []uint64 {
		t.Helper()
		var seqs []uint64
		err := db.View(context.Background(), func(tx kv.Tx) error {
			es, err := List(tx, f)
			for _, e := range es {
				seqs = append(seqs, e.Seq)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return seqs
	}
	tests := []struct {
		name string
		f    Filter
		want string
	}{
		{"all", Filter{Limit: 50}, "[7 6 5 4 3 2 1]"},
		{"limit", Filter{Limit: 2}, "[7 6]"},
		{"one user", Filter{UserID: "patient_42", Limit: 50}, "[7 5 3 1]"},
		{"one user, limit", Filter{UserID: "patient_7", Limit: 2}, "[6 4]"},
		{"one user, before", Filter{UserID: "patient_42", Before: 5, Limit: 50}, "[3 1]"},
		{"all, before", Filter{Before: 3, Limit: 50}, "[2 1]"},
		{"unknown user", Filter{UserID: "nobody", Limit: 50}, "[]"},
		{"agent filter", Filter{UserID: "patient_42", AgentID: "triage", Limit: 50}, "[]"},
		{"zero limit", Filter{}, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmt.Sprint(list(tt.f)); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestExportVerifiesOffline(t *testing.T) {
	db := openStore(t)
	key := testKey(1)
	appendN(t, db, key, 3)
	var buf bytes.Buffer
	if n, err := Export(context.Background(), db, &buf); err != nil || n != 3 {
		t.Fatalf("export: %d, %v, want 3 entries, no error", n, err)
	}
	// The procedure of docs/audit.md, with nothing but the lines and the key:
	// every entry's hash and link, then the signed head on the last line.
	pub := key.Public().(ed25519.PublicKey)
	prev := Genesis
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines for 3 entries and the head, want 4", len(lines))
	}
	for i, line := range lines[:3] {
		var e Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		canonical, _ := json.Marshal([]any{e.Seq, e.TS, e.Principal, e.UserID, e.AgentID, e.RunID, e.Action, e.Detail})
		sum := sha256.Sum256([]byte(e.PrevHash + "|" + string(canonical)))
		if e.PrevHash != prev || hex.EncodeToString(sum[:]) != e.Hash || e.Sig != "" || strings.Contains(line, `"sig"`) {
			t.Fatalf("line %d does not verify: %s", i+1, line)
		}
		if err := verifyEntry(pub, e); err != nil {
			t.Fatalf("verifyEntry: %v", err)
		}
		prev = e.Hash
	}
	var h ExportedHead
	if err := json.Unmarshal([]byte(lines[3]), &h); err != nil {
		t.Fatal(err)
	}
	sig, _ := hex.DecodeString(h.Head.Sig)
	if h.Head.Seq != 3 || h.Head.Hash != prev || !ed25519.Verify(pub, []byte(fmt.Sprintf("countersign.audit.head.v1|%d|%s", h.Head.Seq, h.Head.Hash)), sig) {
		t.Fatalf("head line does not verify: %s", lines[3])
	}
}

// The canonical encoding is documented byte for byte in docs/audit.md; this
// pins it.
func TestCanonicalEncoding(t *testing.T) {
	e := Entry{Seq: 12, TS: "2026-09-26T12:20:13Z", Principal: "dr_smith [U0123ABC]", UserID: "patient_42",
		Action: "confirm_change", Detail: "a<b>&c \"q\" \\ \n\t\u2028 é \x01"}
	want := `[12,"2026-09-26T12:20:13Z","dr_smith [U0123ABC]","patient_42","","","confirm_change","a\u003cb\u003e\u0026c \"q\" \\ \n\t\u2028 é \u0001"]`
	if got := string(e.Canonical()); got != want {
		t.Fatalf("canonical:\n got %s\nwant %s", got, want)
	}
}

func TestAppendTruncatesLongDetailOnARuneBoundary(t *testing.T) {
	db := openStore(t)
	key := testKey(1)
	long := strings.Repeat("é", MaxDetail)
	err := db.Update(context.Background(), func(tx kv.Tx) error {
		e, err := Append(tx, key, t0, Entry{Action: "x", Detail: long})
		if err == nil && (len(e.Detail) > MaxDetail || !strings.HasSuffix(e.Detail, "...") || !json.Valid([]byte(`"`+strings.TrimSuffix(e.Detail, "...")+`"`))) {
			t.Errorf("detail = %q (%d bytes), want at most %d bytes of valid text ending in %q", e.Detail, len(e.Detail), MaxDetail, "...")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify(t, db, key.Public().(ed25519.PublicKey)); !rep.Intact {
		t.Fatalf("report = %+v, want intact", rep)
	}
}

func TestExportKeepsAnUnreadableRow(t *testing.T) {
	db := openStore(t)
	appendN(t, db, testKey(1), 3)
	putRow(t, db, bucketAudit, kv.U64(2), []byte("not json\n{"))
	var buf bytes.Buffer
	n, err := Export(context.Background(), db, &buf)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if err != nil || n != 3 || len(lines) != 4 || !strings.HasPrefix(lines[3], `{"head":`) || lines[1] != `{"seq":2,"invalid_row_base64":"bm90IGpzb24Kew=="}` {
		t.Fatalf("export: %d %v, want 3 entries, no error, row 2 as %s and the head on line 4:\n%s", n, err, `{"seq":2,"invalid_row_base64":"bm90IGpzb24Kew=="}`, buf.String())
	}
}

// verifyEntry checks one exported entry on its own: its hash against its
// content and, for an entry written when every row was signed, its
// signature. An entry without a signature is authenticated only by the
// signed head its chain leads to; Verify walks the links to it.
func verifyEntry(pub ed25519.PublicKey, e Entry) error {
	if e.ComputeHash() != e.Hash {
		return errors.New(ReasonTampered)
	}
	if e.Sig == "" {
		return nil
	}
	sig, err := hex.DecodeString(e.Sig)
	if err != nil || !ed25519.Verify(pub, entryMessage(e.Hash), sig) {
		return errors.New(ReasonSignature)
	}
	return nil
}
