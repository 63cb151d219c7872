package memory

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/countersign/countersign/policy"
)

// viaJSON is what the fact's stored JSON decodes to: what Load returns.
func viaJSON(t testing.TB, f *Fact) (*Fact, bool) {
	t.Helper()
	f.V = factVersion
	b, err := json.Marshal(f)
	if err != nil {
		return nil, false // put refuses it too
	}
	g, err := decodeFact(b)
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return g, true
}

// checkRecord asserts that f's live record decodes to exactly what its
// JSON decodes to.
func checkRecord(t testing.TB, f *Fact) {
	t.Helper()
	want, ok := viaJSON(t, f)
	if !ok {
		return
	}
	rec, err := encodeRecord(f)
	if err != nil {
		t.Fatalf("encodeRecord(%+v): %v", f, err)
	}
	got, err := decodeRecord(jsonSpace(f.Space), jsonString(f.Subject), f.ID, rec)
	if err != nil {
		t.Fatalf("decodeRecord: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("live record and JSON disagree:\nrecord %#v\njson   %#v", got, want)
	}
	// The projection recall reads is the same record's prefix.
	k := subjectKey(f.Space, f.Subject, f.ID)
	p, err := decodeProjection(len(spaceKey(f.Space)), k, rec)
	if err != nil || string(p.value) != want.Value || string(p.said) != want.Said || string(p.category) != want.Category ||
		p.flagged != (want.Status == StatusFlagged) || string(p.subject) != f.Subject || p.id != f.ID {
		t.Fatalf("projection %+v (err %v) does not match %+v", p, err, want)
	}
}

var tricky = []string{
	"", "Zustand", "warfarin 5mg daily", "<b>&amp;</b>", "line\u2028sep\u2029", "\xff\xfe", "a\xc3", "ok\xe2\x80",
	"tab\there\nnew", "\"quoted\" \\ back", "\ufffd", "İstanbul ÄRZTIN", "日本語のテキスト", "\x00nul", "emoji 🧪",
}

func randString(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return string(b)
	}
	return tricky[r.IntN(len(tricky))]
}

func randTime(r *rand.Rand) time.Time {
	switch r.IntN(8) {
	case 0:
		return time.Time{}
	case 1:
		return time.Now() // with a monotonic reading
	case 2:
		return t0.In(time.Local)
	case 3:
		return t0.Add(time.Duration(r.Int64N(1e18))).In(time.FixedZone("", (r.IntN(48)-24)*1800))
	case 4:
		return t0.In(time.FixedZone("CEST", 7200))
	case 5:
		return time.Time{}.In(time.FixedZone("x", 3600)) // zero instant, not UTC
	case 6:
		return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // not RFC 3339: the fact cannot be stored
	}
	return time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC()
}

var metas = []string{"", `{}`, `{"team":"eng"}`, ` { "a" : [1, 2 ,3],"b":"<x> & y" } `, `{"u":"\u2028"}`, `null`, `{"s":"\xff"}`, `{`, `{"n":1e400}`}

func randFact(r *rand.Rand) *Fact {
	confs := []float64{0.95, 0.1 + 0.2, math.Copysign(0, -1), 1e-7, 1e21, 5e-324, 0.7, 1}
	f := &Fact{
		ID:    r.Uint64N(1 << 40),
		Space: Space{UserID: randString(r), AgentID: randString(r), RunID: randString(r)},
		// Subjects are keys: no NUL (the key separator).
		Subject: "subj_" + randString(r), Value: randString(r), Said: randString(r), Category: randString(r),
		Scope: randString(r), Kind: Kind(randString(r)), Source: randString(r), SetBy: randString(r),
		Supersedes: r.Uint64N(3) * r.Uint64N(1<<62), Confidence: confs[r.IntN(len(confs))],
		SetAt: randTime(r), RetiredAt: randTime(r), ProposedAt: randTime(r), DecidedAt: randTime(r),
		Archived: r.IntN(2) == 0, Tombstone: r.IntN(2) == 0,
		Pending: Action(randString(r)), Held: randString(r), ProposerID: randString(r), ProposerName: randString(r),
		Resolved: Resolution(randString(r)), DecidedBy: randString(r), Note: randString(r), Reason: randString(r),
		ItemID: r.Uint64N(1 << 50), Target: randString(r), Assurance: policy.Assurance(randString(r)),
	}
	if m := metas[r.IntN(len(metas))]; m != "" {
		f.Metadata = json.RawMessage(m)
	}
	for _, b := range []byte(f.Subject) {
		if b == 0 {
			f.Subject = "subj"
		}
	}
	f.Status = StatusActive
	if r.IntN(2) == 0 {
		f.Status = StatusFlagged
	}
	return f
}

func TestRecordMatchesJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		checkRecord(t, randFact(r))
	}
	// Only live facts have a live record.
	_, err := encodeRecord(&Fact{Status: StatusSuperseded})
	if err == nil {
		t.Fatal("encodeRecord accepted a SUPERSEDED fact")
	}
	// A truncated or altered record is an error, never a panic.
	var rec []byte
	for rec == nil {
		f := randFact(r)
		if _, ok := viaJSON(t, f); ok {
			if rec, err = encodeRecord(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	for n := range len(rec) {
		if _, err := decodeRecord(Space{}, "s", 1, rec[:n]); err == nil {
			t.Fatalf("truncated record (%d of %d bytes) decoded", n, len(rec))
		}
	}
	// An entry of an older store (the projection alone) or with a record of
	// an unknown version is read from the JSON instead.
	r2 := recordReader[[]byte]{v: rec, off: 2}
	r2.span()
	r2.span()
	r2.span()
	if !hasRecord(rec) || hasRecord(rec[:r2.off]) {
		t.Fatal("hasRecord does not tell a record from a projection")
	}
	future := bytes.Clone(rec)
	future[r2.off] = recordVersion + 1
	if hasRecord(future) {
		t.Fatal("a record of an unknown version is taken")
	}
}

// TestRecordVersion2StillReads: a live record written before decisions
// carried their assurance (version 2: the same fields without it) is
// still decoded, to what its fact's JSON gives (no assurance).
func TestRecordVersion2StillReads(t *testing.T) {
	t.Parallel()
	f := &Fact{ID: 9, Space: Space{UserID: "patient_42"}, Subject: "allergy", Value: "penicillin", Status: StatusActive,
		Scope: DefaultScope, Kind: KindState, SetAt: time.Unix(1700000000, 0).UTC(), Resolved: ResolvedConfirmed,
		DecidedBy: "dr_smith [U1]", Target: "none"}
	rec, err := encodeRecord(f)
	if err != nil {
		t.Fatal(err)
	}
	// Walk to the assurance: the projection's three fields, the version,
	// then the record's thirteen strings.
	r := recordReader[[]byte]{v: rec, off: 2}
	for range 3 {
		r.span()
	}
	at := r.off
	r.off++
	for range 13 {
		r.span()
	}
	if r.err != nil || rec[at] != recordVersion || rec[r.off] != 0 {
		t.Fatalf("record layout: version %d at %d, assurance length %d at %d (err %v), want version %d and assurance length 0", rec[at], at, rec[r.off], r.off, r.err, recordVersion)
	}
	v2 := append(bytes.Clone(rec[:r.off]), rec[r.off+1:]...)
	v2[at] = recordVersion2
	if !hasRecord(v2) {
		t.Fatal("a version 2 record is not taken")
	}
	got, err := decodeRecord(f.Space, f.Subject, f.ID, v2)
	if err != nil {
		t.Fatalf("decoding a version 2 record: %v", err)
	}
	want, _ := viaJSON(t, f)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("version 2 record:\n got %+v\nwant %+v", got, want)
	}
	// The same fact decided with an assurance keeps it in the record.
	f.Assurance = policy.AssuranceOIDC
	if rec, err = encodeRecord(f); err != nil {
		t.Fatal(err)
	}
	if got, err := decodeRecord(f.Space, f.Subject, f.ID, rec); err != nil || got.Assurance != policy.AssuranceOIDC {
		t.Fatalf("a record with the assurance: %+v %v, want assurance %s and no error", got, err, policy.AssuranceOIDC)
	}
}

func TestJSONString(t *testing.T) {
	t.Parallel()
	for _, s := range append(tricky, "\xed\xa0\x80", "a\xf0\x9f\x98", "\xc0\xaf") {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if got := jsonString(s); got != want {
			t.Errorf("jsonString(%q) = %q, want %q", s, got, want)
		}
	}
}

// FuzzRecordMatchesJSON checks the live record against JSON on arbitrary
// text, metadata and times.
func FuzzRecordMatchesJSON(f *testing.F) {
	f.Add("allergy", "penicillin", "she said so", "Allergy", `{"a":1}`, int64(1700000000), int64(5), 3600, 0.95)
	f.Add("s\xff", "<v>\u2028", "\xe2\x80", "", ` [ 1 ] `, int64(-1), int64(0), -1800, 0.1)
	f.Fuzz(func(t *testing.T, subject, value, said, category, meta string, sec, nsec int64, offset int, conf float64) {
		for _, b := range []byte(subject) {
			if b == 0 {
				return
			}
		}
		fact := &Fact{ID: 7, Space: Space{UserID: subject}, Subject: subject, Value: value, Said: said, Category: category,
			Confidence: conf, Status: StatusActive, Scope: DefaultScope, Kind: KindState,
			SetAt: time.Unix(sec, nsec).In(time.FixedZone("", offset%(30*3600))), RetiredAt: time.Unix(nsec, sec)}
		if meta != "" {
			fact.Metadata = json.RawMessage(meta)
		}
		checkRecord(t, fact)
	})
}
