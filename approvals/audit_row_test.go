package approvals

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/kv"
)

// A binary row reads back as the entry that was appended, whatever its
// strings hold.
func TestBinaryRowRoundTrip(t *testing.T) {
	prev := Genesis
	for i, e := range []Entry{
		{},
		{Principal: "dr_smith [U0123ABC]", UserID: "patient_42", AgentID: "a", RunID: "r", Action: "remember", Detail: "ADD x #1"},
		{Principal: "é 中 \u2028", Detail: "line\nbreak\ttab\x00\x01\x7f <&> \"q\" \\ 🙂"},
		{Action: "x", Detail: strings.Repeat("d", MaxDetail)},
		{Detail: "invalid utf-8 \xff\xfe kept as given"},
	} {
		for _, at := range []time.Time{t0, time.Unix(0, 0), time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)} {
			e.Seq = uint64(i*10 + 1)
			e.TS = at.UTC().Format(time.RFC3339)
			e.PrevHash = prev
			e.Hash = e.ComputeHash()
			row, err := encodeRow(nil, &e, at.Unix())
			if err != nil {
				t.Fatal(err)
			}
			if row[0] != rowV2 {
				t.Fatalf("row starts with %#x, want %#x", row[0], rowV2)
			}
			r, err := decodeRow(e.Seq, row)
			if err != nil {
				t.Fatalf("%+v: %v", e, err)
			}
			if !r.binary || !r.linksTo(prev) || r.linksTo(e.Hash) {
				t.Fatalf("%+v: link bytes wrong, want a binary row linking to %s and not to its own hash", e, prev)
			}
			got := r.e
			got.PrevHash = prev
			if got != e {
				t.Fatalf("read back\n%+v\nwant\n%+v", got, e)
			}
			// Every row cut short is refused, never read as another entry.
			for n := range row {
				if _, err := decodeRow(e.Seq, row[:n]); err == nil {
					t.Fatalf("%+v: the row cut to %d bytes decodes", e, n)
				}
			}
			if _, err := decodeRow(e.Seq, append(row, 0)); err == nil {
				t.Fatalf("%+v: a row with a byte more decodes", e)
			}
			prev = e.Hash
		}
	}
}

// The binary row of a typical remember entry is 175 bytes smaller than
// its JSON: the hashes as bytes, no field names, no previous hash.
func TestBinaryRowSize(t *testing.T) {
	e := Entry{Seq: 1234567, TS: t0.Format(time.RFC3339), Principal: "bench-agent [prin_agent]", UserID: "default", AgentID: "w00",
		Action: "remember", Detail: "ADD note_0001002 #1234567", PrevHash: Genesis}
	e.Hash = e.ComputeHash()
	row, err := encodeRow(nil, &e, t0.Unix())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(&e)
	strs := len(e.Principal) + len(e.UserID) + len(e.AgentID) + len(e.RunID) + len(e.Action) + len(e.Detail)
	if want := 1 + 4 + 32 + 5 + 6 + strs; len(row) != want {
		t.Fatalf("row is %d bytes, want %d", len(row), want)
	}
	if len(js)-len(row) < 175 {
		t.Fatalf("row %d bytes, JSON %d, want the row at least 175 bytes shorter", len(row), len(js))
	}
}

// legacyChain appends n entries and rewrites their rows as the JSON rows
// (format 1) that stores written before binary rows hold.
func legacyChain(t *testing.T, db kv.Store, key ed25519.PrivateKey, n int) []Entry {
	t.Helper()
	es := appendN(t, db, key, n)
	for _, e := range es {
		b, _ := json.Marshal(&e)
		putRow(t, db, bucketAudit, kv.U64(e.Seq), b)
	}
	return es
}

// A store whose chain began with JSON rows goes on with binary rows: the
// whole chain verifies, lists with every previous hash, and exports as the
// JSON rows it always exported.
func TestJSONRowsThenBinaryRows(t *testing.T) {
	db := openStore(t)
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	old := legacyChain(t, db, key, 3)
	var all []Entry
	all = append(all, old...)
	err := db.Update(context.Background(), func(tx kv.Tx) error {
		for i := 0; i < 3; i++ {
			e, err := Append(tx, key, t0.Add(time.Hour), Entry{Principal: "ops [prin_1]", UserID: "patient_42", Action: "remember", Detail: "ADD later"})
			if err != nil {
				return err
			}
			all = append(all, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := rawRow(t, db, 3); v[0] != '{' {
		t.Fatalf("row 3 is not JSON: %q, want it to start with '{'", v)
	}
	if v := rawRow(t, db, 4); v[0] != rowV2 {
		t.Fatalf("row 4 is not binary: %q, want it to start with %#x", v, rowV2)
	}
	if rep := verify(t, db, pub); !rep.Intact || rep.Entries != 6 {
		t.Fatalf("report = %+v, want intact with 6 entries", rep)
	}
	// The export: one JSON row per entry, exactly as the JSON rows were.
	var buf bytes.Buffer
	if n, err := Export(context.Background(), db, &buf); err != nil || n != 6 {
		t.Fatalf("export: %d entries, err %v; want 6, no error", n, err)
	}
	sc := bufio.NewScanner(&buf)
	for i := 0; sc.Scan(); i++ {
		if i == len(all) {
			if !strings.HasPrefix(sc.Text(), `{"head":{"seq":6,`) {
				t.Fatalf("last line %s, want it to start with %s", sc.Text(), `{"head":{"seq":6,`)
			}
			continue
		}
		want, _ := json.Marshal(&all[i])
		if sc.Text() != string(want) {
			t.Fatalf("line %d:\n%s\nwant\n%s", i+1, sc.Text(), want)
		}
	}
	// The listing fills in the previous hash a binary row does not store.
	var got []Entry
	err = db.View(context.Background(), func(tx kv.Tx) error {
		var err error
		got, err = List(tx, Filter{UserID: "patient_42", Limit: 10})
		return err
	})
	if err != nil || len(got) != 5 { // 3 later entries + seqs 1 and 3
		t.Fatalf("list: %d entries, err %v; want 5, no error", len(got), err)
	}
	for _, g := range got {
		if g != all[g.Seq-1] {
			t.Fatalf("listed\n%+v\nwant\n%+v", g, all[g.Seq-1])
		}
	}
	// A binary row whose link bytes no longer name the row before: the
	// link is broken there.
	v := rawRow(t, db, 5)
	v[1] ^= 0xff
	putRow(t, db, bucketAudit, kv.U64(5), v)
	if rep := verify(t, db, pub); rep.Intact || rep.BrokenAt != 5 || rep.Reason != ReasonLink {
		t.Fatalf("report = %+v, want broken at 5: %q", rep, ReasonLink)
	}
	// A byte of its stored hash flipped instead: its content no longer
	// gives its hash.
	v[1] ^= 0xff
	v[rowHashAt+7] ^= 0x01
	putRow(t, db, bucketAudit, kv.U64(5), v)
	if rep := verify(t, db, pub); rep.Intact || rep.BrokenAt != 5 || rep.Reason != ReasonTampered {
		t.Fatalf("report = %+v, want broken at 5: %q", rep, ReasonTampered)
	}
}

// The per-user index stores no value: its key holds the sequence number.
func TestUserIndexHoldsKeysOnly(t *testing.T) {
	db := openStore(t)
	appendN(t, db, testKey(1), 2)
	err := db.View(context.Background(), func(tx kv.Tx) error {
		n := 0
		err := tx.Ascend(bucketAuditUser, nil, nil, func(k, v []byte) error {
			n++
			if len(v) != 0 {
				t.Errorf("index %q holds %d bytes, want 0", k, len(v))
			}
			return nil
		})
		if n != 2 {
			t.Errorf("%d index keys, want 2", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeRow: no stored bytes make the reader panic, and a row read as
// binary is written back to the same bytes.
func FuzzDecodeRow(f *testing.F) {
	e := Entry{Seq: 1, TS: t0.Format(time.RFC3339), Principal: "p", Action: "remember", Detail: "ADD x", PrevHash: Genesis}
	e.Hash = e.ComputeHash()
	row, _ := encodeRow(nil, &e, t0.Unix())
	js, _ := json.Marshal(&e)
	f.Add(row)
	f.Add(js)
	f.Add([]byte{rowV2})
	f.Fuzz(func(t *testing.T, v []byte) {
		r, err := decodeRow(7, v)
		if err != nil || !r.binary {
			return
		}
		ts, perr := time.Parse(time.RFC3339, r.e.TS)
		if perr != nil {
			return // a time no append writes (beyond year 9999): its hash cannot match
		}
		r.e.PrevHash = Genesis
		back, err := encodeRow(nil, &r.e, ts.Unix())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back[rowHashAt:], v[rowHashAt:]) {
			t.Fatalf("re-encoded\n%x\nwant\n%x", back, v)
		}
	})
}

// The canonical form the hash covers is encoding/json's Marshal of the
// fields as an array, byte for byte (docs/audit.md's offline verifiers
// compute it that way).
func checkCanonical(t *testing.T, e Entry) {
	t.Helper()
	want, err := json.Marshal([]any{e.Seq, e.TS, e.Principal, e.UserID, e.AgentID, e.RunID, e.Action, e.Detail})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Canonical(); !bytes.Equal(got, want) {
		t.Fatalf("canonical\n%s\nwant\n%s", got, want)
	}
}

var canonicalStrings = []string{"", "plain", "a<b>&c \"q\" \\", "line\nbreak\ttab\r\b\f\x00\x01\x1f\x7f", "é 中 \u2028\u2029 🙂",
	"invalid \xff\xfe \xe2\x82", "\xed\xa0\x80", strings.Repeat("x", 600)}

func TestCanonicalMatchesEncodingJSON(t *testing.T) {
	for i, s := range canonicalStrings {
		checkCanonical(t, Entry{Seq: uint64(i) << (i * 8 % 64), TS: s, Principal: s, UserID: s, AgentID: s, RunID: s, Action: s, Detail: s})
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range canonicalStrings {
		f.Add(uint64(len(s)), s, s)
	}
	f.Fuzz(func(t *testing.T, seq uint64, a, b string) {
		checkCanonical(t, Entry{Seq: seq, TS: a, Principal: b, UserID: a + b, AgentID: b, RunID: a, Action: b, Detail: a})
	})
}
