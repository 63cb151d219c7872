package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// world is a random workload on one space of a real bbolt store, with
// declared slots so that it supersedes, flags, proposes and retracts.
type world struct {
	t   *testing.T
	r   *rand.Rand
	db  *bolt.DB
	o   Options
	sp  Space
	now time.Time
	n   int // subjects made up so far
}

func newWorld(t *testing.T, seed uint64) *world {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "w.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	schema, err := NewSchema([]Slot{
		{Name: "active_medication", Category: "active_medication", Verbatim: true, Multi: true, Confirm: true, Aliases: []string{"meds"}},
		{Name: "allergy", Category: "Allergy", Verbatim: true, Multi: true},
		{Name: "code_status", Category: "code_status", Confirm: true},
		{Name: "diagnosis", Category: "ÄRZT"},
		{Name: "hosting"},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Schema: schema, TrustedSources: []string{"fhir"}}.WithDefaults()
	return &world{t: t, r: rand.New(rand.NewPCG(seed, 99)), db: db, o: o, sp: Space{UserID: "u", AgentID: fmt.Sprint("a", seed)}, now: t0}
}

// vocab is small, so words are shared by many facts and blocks fill.
var vocab = []string{"warfarin", "apixaban", "penicillin", "dose", "mg", "daily", "blood", "pressure", "heart",
	"rate", "follow", "up", "Fly.io", "Heroku", "ÄRZTIN", "ärztin", "İstanbul", "日本", "5mg", "120/80", "x\xffy",
	"the", "is", "of", "and", "current", "nurse", "bedside", "Zustand", "state-library"}

func (w *world) words(n int) string {
	var b []string
	for range n {
		if w.r.IntN(8) == 0 {
			b = append(b, fmt.Sprint("w", w.r.IntN(500))) // a rarer word
			continue
		}
		b = append(b, vocab[w.r.IntN(len(vocab))])
	}
	seps := []string{" ", ", ", "; ", " — ", "\n", "-", "/"}
	return strings.Join(b, seps[w.r.IntN(len(seps))])
}

func (w *world) subject() string {
	switch w.r.IntN(10) {
	case 0, 1:
		return "active_medication"
	case 2:
		return "Meds"
	case 3:
		return "allergy"
	case 4:
		return "code_status"
	case 5:
		return "diagnosis"
	case 6:
		return "hosting"
	case 7:
		w.n++
		return fmt.Sprint("note ", w.n)
	case 8:
		return w.words(1 + w.r.IntN(2)) // words a question may ask for
	}
	return fmt.Sprint("note ", w.r.IntN(w.n+1))
}

func (w *world) update(fn func(tx kv.Tx) error) {
	w.t.Helper()
	err := w.db.Update(context.Background(), fn)
	var me *policy.Error
	if err != nil && !errors.As(err, &me) {
		w.t.Fatal(err)
	}
}

// step makes one random change.
func (w *world) step() {
	w.now = w.now.Add(time.Minute)
	in := Input{Op: OpRemember, Subject: w.subject(), Value: w.words(1 + w.r.IntN(5)), Confidence: DefaultConfidence,
		Kind: KindState, By: "bot [p]", ByID: "p", ByName: "bot"}
	if w.r.IntN(3) == 0 {
		in.Said = w.words(w.r.IntN(9))
	}
	if w.r.IntN(5) == 0 {
		in.Category = []string{"allergy", "Allergy", "meds", "ÄRZT", "ärzt", "x"}[w.r.IntN(6)]
	}
	if w.r.IntN(8) == 0 {
		in.Confidence = 0.5 // flagged
	}
	if w.r.IntN(4) == 0 {
		in.Kind = KindEvent
	}
	in.Trusted = w.r.IntN(3) == 0
	switch w.r.IntN(12) {
	case 0, 1: // forget
		in.Op, in.Value = OpForget, ""
	case 2, 3: // decide a proposal
		w.update(func(tx kv.Tx) error {
			open, err := OpenProposals(tx, w.sp)
			if err != nil || len(open) == 0 {
				return err
			}
			id := open[w.r.IntN(len(open))].ID
			d := Decider{By: "dr [m]"}
			if w.r.IntN(2) == 0 {
				_, err = w.o.Confirm(tx, w.sp, id, d, w.now)
			} else {
				_, err = w.o.Reject(tx, w.sp, id, d, w.now)
			}
			return err
		})
		return
	case 4: // edit a live fact
		w.update(func(tx kv.Tx) error {
			var live []*Fact
			if err := LiveAll(tx, w.sp, func(f *Fact) error { live = append(live, f); return nil }); err != nil || len(live) == 0 {
				return err
			}
			in.Op, in.Target, in.Approver = OpEdit, live[w.r.IntN(len(live))].ID, w.r.IntN(2) == 0
			_, err := w.o.Write(tx, w.sp, in, w.now)
			return err
		})
		return
	}
	w.update(func(tx kv.Tx) error {
		_, err := w.o.Write(tx, w.sp, in, w.now)
		return err
	})
}

func (w *world) request() RecallRequest {
	q := w.words(1 + w.r.IntN(6))
	if w.r.IntN(10) == 0 {
		q = "what is the?" // stopwords only
	}
	if w.r.IntN(4) == 0 {
		q = strings.ToUpper(q)
	}
	crit := map[string]bool{}
	for _, c := range []string{"allergy", "active_medication", "ärzt", "ÄRZT", "", "x", "code_status"} {
		if w.r.IntN(3) == 0 {
			crit[c] = w.r.IntN(4) != 0 // a false entry is not critical
		}
	}
	return RecallRequest{Question: q, Critical: crit, Context: w.r.IntN(30), Budget: w.r.IntN(120)}
}

// flat is a recall in comparable form.
type flat struct {
	Facts   []Fact
	Scores  []int
	Crit    []bool
	Flagged []string
	Active  int
	Whole   bool
	Err     string
}

func flatten(r Recall, err error) flat {
	if err != nil {
		return flat{Err: err.Error()}
	}
	f := flat{Flagged: r.FlaggedSubjects, Active: r.Active, Whole: r.Whole}
	for _, x := range r.Facts {
		f.Facts = append(f.Facts, *x.Fact)
		f.Scores = append(f.Scores, x.Score)
		f.Crit = append(f.Crit, x.Critical)
	}
	return f
}

// TestRecallIndexMatchesScan is the property test of the recall index: on
// random spaces, under random writes (merges included), RecallSpace gives
// exactly what a scan of every live fact gives (recallScan, the former
// RecallSpace) and what Select gives over the space's live facts; and the
// index always holds exactly what the live index implies.
func TestRecallIndexMatchesScan(t *testing.T) {
	t.Parallel()
	for seed := range uint64(5) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			recallIndexMatchesScan(t, seed)
		})
	}
}

// recallIndexMatchesScan plays one seed's world: 900 steps, and at every
// seventh the index's answer, the scan's and Select's must agree.
func recallIndexMatchesScan(t *testing.T, seed uint64) {
	indexed, merged := 0, 0
	{
		w := newWorld(t, seed)
		for step := range 900 {
			w.step()
			if step%7 != 0 {
				continue
			}
			err := w.db.View(context.Background(), func(tx kv.Tx) error {
				checkIndex(t, tx, w.sp)
				st, _, err := loadState(tx, spaceKey(w.sp))
				if err != nil {
					return err
				}
				var live []*Fact
				if err := LiveAll(tx, w.sp, func(f *Fact) error { live = append(live, f); return nil }); err != nil {
					return err
				}
				for range 4 {
					req := w.request()
					got := flatten(RecallSpace(tx, w.sp, req))
					want := flatten(recallScan(tx, w.sp, req))
					sel := flatten(Select(live, req))
					if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, sel) {
						t.Fatalf("seed %d step %d, %+v: want the index, the scan and Select to agree\nindex  %+v\nscan   %+v\nselect %+v", seed, step, req, got, want, sel)
					}
					if st.mode == modeIndexed && st.active > uint64(req.Context) {
						indexed++
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		_ = w.db.View(context.Background(), func(tx kv.Tx) error {
			return kv.Prefix(tx, bucketRecall, tagKey(spaceKey(w.sp), tagWord), func(_, _ []byte) error {
				merged++
				return nil
			})
		})
	}
	t.Logf("indexed %d merged blocks %d", indexed, merged)
	if indexed < 150 || merged == 0 {
		t.Fatalf("the index path ran %d times, %d merged blocks, want at least 150 runs and a merged block: the test does not exercise it", indexed, merged)
	}
}

// checkIndex asserts the recall index of a space holds exactly what its
// live index implies, with well-formed blocks.
func checkIndex(t testing.TB, tx kv.Tx, sp Space) {
	t.Helper()
	sk := spaceKey(sp)
	st, ok, err := loadState(tx, sk)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		// No write has reached the space: it must hold nothing.
		if err := kv.Prefix(tx, bucketLive, sk, func(_, _ []byte) error {
			t.Fatal("a space with live facts has no recall index")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return
	}
	// What the live index implies.
	if st.mode == modeSmall {
		// Nothing is kept: no fact id may be past indexAt.
		last, err := LastID(tx, sp)
		if err != nil || last > indexAt {
			t.Fatalf("small space with fact #%d (%v), want none past #%d", last, err, indexAt)
		}
		if err := kv.Prefix(tx, bucketRecall, sk, func(k, _ []byte) error {
			if !bytes.Equal(k, tagKey(sk, tagState)) {
				t.Fatalf("small space holds %q, want only its state key %q", k, tagKey(sk, tagState))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := indexState{mode: st.mode}
	wantTerms := map[string][]posting{}
	contents := map[uint64][]byte{}
	subjects := map[uint64]string{}
	if err := kv.Prefix(tx, bucketLive, sk, func(k, v []byte) error {
		if !hasRecord(v) {
			t.Fatalf("live entry without its record in a counted space: %q", v)
		}
		p, err := decodeProjection(len(sk), k, v)
		if err != nil {
			return err
		}
		cv := contentOf(&p)
		if cv == nil {
			want.flagged++
			return nil
		}
		want.active++
		contents[p.id] = cv
		subjects[p.id] = string(p.subject)
		c, err := decodeContent(cv)
		if err != nil {
			return err
		}
		for i, w := range c.words {
			k := string(termPrefix(sk, tagWord, w))
			wantTerms[k] = append(wantTerms[k], posting{p.id, c.masks[i]})
		}
		if c.category != "" {
			k := string(termPrefix(sk, tagCat, c.category))
			wantTerms[k] = append(wantTerms[k], posting{p.id, 0})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The log.
	tomb := map[uint64][]byte{}
	pending := map[uint64][]byte{}
	logs := uint64(0)
	lp := tagKey(sk, tagLog)
	if err := kv.Prefix(tx, bucketRecall, lp, func(k, v []byte) error {
		id, kind, err := parseLogKey(lp, k)
		if err != nil {
			return err
		}
		logs++
		if kind == logTomb {
			tomb[id] = bytes.Clone(v)
			return nil
		}
		s, c, err := splitPending(v)
		if err != nil {
			return err
		}
		if string(s) != subjects[id] || !bytes.Equal(c, contents[id]) {
			t.Fatalf("pending #%d = %q %q, want %q %q", id, s, c, subjects[id], contents[id])
		}
		pending[id] = bytes.Clone(c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want.log = logs
	if st != want {
		t.Fatalf("state %+v, want %+v", st, want)
	}
	if st.mode != modeIndexed {
		// Only counted: nothing else may be stored.
		if st.active > indexAt {
			t.Fatalf("%d active facts and no index, want at most %d", st.active, indexAt)
		}
		if err := kv.Prefix(tx, bucketRecall, sk, func(k, _ []byte) error {
			if !bytes.Equal(k, tagKey(sk, tagState)) {
				t.Fatalf("unindexed space holds %q, want only its state key %q", k, tagKey(sk, tagState))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return
	}
	// The merged blocks: well formed, and each fact's postings are its
	// current content unless it is pending (then it must be tombstoned if
	// present) or tombstoned (then they are the tombstone's content).
	blocks := map[string][]posting{}
	var prevPrefix string
	var prevLast uint64
	for _, tag := range []byte{tagWord, tagCat} {
		if err := kv.Prefix(tx, bucketRecall, tagKey(sk, tag), func(k, v []byte) error {
			prefix, start := string(k[:len(k)-8]), kv.ParseU64(k[len(k)-8:])
			ps, err := decodeBlock(nil, start, v)
			if err != nil {
				return err
			}
			if len(ps) == 0 || len(ps) > maxBlock || ps[0].id < start {
				t.Fatalf("block %q at %d holds %d postings from #%d, want 1 to %d postings from #%d on", prefix, start, len(ps), ps[0].id, maxBlock, start)
			}
			if !slices.IsSortedFunc(ps, func(a, b posting) int { return cmpID(a.id, b.id) }) {
				t.Fatalf("block %q unsorted", prefix)
			}
			if prefix == prevPrefix && start <= prevLast {
				t.Fatalf("block %q at %d overlaps the previous (last #%d)", prefix, start, prevLast)
			}
			prevPrefix, prevLast = prefix, ps[len(ps)-1].id
			blocks[prefix] = append(blocks[prefix], ps...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	byID := map[uint64]map[string]byte{} // id -> term -> mask, as merged
	for term, ps := range blocks {
		for _, p := range ps {
			if byID[p.id] == nil {
				byID[p.id] = map[string]byte{}
			}
			byID[p.id][term] = p.mask
		}
	}
	termsOf := func(v []byte) map[string]byte {
		c, err := decodeContent(v)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]byte{}
		for i, w := range c.words {
			m[string(termPrefix(sk, tagWord, w))] = c.masks[i]
		}
		if c.category != "" {
			m[string(termPrefix(sk, tagCat, c.category))] = 0
		}
		return m
	}
	for id, terms := range byID {
		switch {
		case tomb[id] != nil:
			if !maps.Equal(terms, termsOf(tomb[id])) {
				t.Fatalf("#%d: the blocks hold %v, want %v (its tombstone's)", id, terms, termsOf(tomb[id]))
			}
		case pending[id] != nil || contents[id] == nil:
			t.Fatalf("#%d is merged but pending or not active, and not tombstoned", id)
		default:
			if !maps.Equal(terms, termsOf(contents[id])) {
				t.Fatalf("#%d: the blocks hold %v, want %v", id, terms, termsOf(contents[id]))
			}
		}
	}
	for id := range tomb {
		if byID[id] == nil && len(termsOf(tomb[id])) > 0 {
			t.Fatalf("#%d is tombstoned but not merged", id)
		}
	}
	// Effective postings = merged (less tombstoned) + pending = want.
	got := map[string][]posting{}
	for term, ps := range blocks {
		for _, p := range ps {
			if tomb[p.id] == nil {
				got[term] = append(got[term], p)
			}
		}
	}
	for id, c := range pending {
		for term, m := range termsOf(c) {
			got[term] = append(got[term], posting{id, m})
		}
	}
	norm := func(m map[string][]posting) {
		for k := range m {
			slices.SortFunc(m[k], func(a, b posting) int { return cmpID(a.id, b.id) })
		}
	}
	norm(got)
	norm(wantTerms)
	if !reflect.DeepEqual(got, wantTerms) {
		t.Fatalf("effective postings differ from the live index")
	}
	// Subjects of the merged active facts.
	for id, s := range subjects {
		if pending[id] != nil {
			continue
		}
		v, err := tx.Get(bucketRecall, idKey(sk, tagSubject, id))
		if err != nil || string(v) != s {
			t.Fatalf("subject entry of #%d = %q (%v), want %q", id, v, err, s)
		}
	}
}

// toV1 rewrites a store as the previous version wrote it: live entries
// without records (version, status, category, value, said) and no recall
// index.
func toV1(t testing.TB, db *bolt.DB) {
	t.Helper()
	err := db.Update(context.Background(), func(tx kv.Tx) error {
		var keys, vals [][]byte
		if err := tx.Ascend(bucketLive, nil, nil, func(k, v []byte) error {
			keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
			return nil
		}); err != nil {
			return err
		}
		for i, k := range keys {
			// The entry without its record: cut after said.
			r := recordReader[[]byte]{v: vals[i], off: 2}
			r.span()
			r.span()
			r.span()
			v1 := vals[i][:r.off]
			if err := tx.Put(bucketLive, k, v1); err != nil {
				return err
			}
		}
		var idx [][]byte
		if err := tx.Ascend(bucketRecall, nil, nil, func(k, _ []byte) error {
			idx = append(idx, bytes.Clone(k))
			return nil
		}); err != nil {
			return err
		}
		for _, k := range idx {
			if err := tx.Delete(bucketRecall, k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot is what the read paths answer for a space.
func snapshot(t testing.TB, db *bolt.DB, sp Space, reqs []RecallRequest) []any {
	t.Helper()
	var out []any
	err := db.View(context.Background(), func(tx kv.Tx) error {
		var all []*Fact
		if err := LiveAll(tx, sp, func(f *Fact) error { all = append(all, f); return nil }); err != nil {
			return err
		}
		out = append(out, all)
		subjects := map[string]bool{}
		for _, f := range all {
			subjects[f.Subject] = true
		}
		for _, s := range slices.Sorted(maps.Keys(subjects)) {
			l, err := Live(tx, sp, s)
			if err != nil {
				return err
			}
			out = append(out, l)
		}
		for _, req := range reqs {
			out = append(out, flatten(RecallSpace(tx, sp, req)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOlderStore opens a space as the previous version wrote it: every
// read answers as before, without its index; the first write builds the
// index and rewrites the live entries, and the answers stay the same.
func TestOlderStore(t *testing.T) {
	t.Parallel()
	for _, steps := range []int{400, 250, 40} { // indexed, counted, small
		t.Run(fmt.Sprint(steps), func(t *testing.T) { olderStore(t, steps) })
	}
}

func olderStore(t *testing.T, steps int) {
	w := newWorld(t, 42)
	for range steps {
		w.step()
	}
	w.update(func(tx kv.Tx) error {
		_, err := w.o.Write(tx, w.sp, Input{Op: OpRemember, Subject: "zz", Value: "old", Confidence: DefaultConfidence, Kind: KindState}, w.now)
		return err
	})
	var reqs []RecallRequest
	for range 30 {
		reqs = append(reqs, w.request())
	}
	before := snapshot(t, w.db, w.sp, reqs)
	toV1(t, w.db)
	err := w.db.View(context.Background(), func(tx kv.Tx) error {
		_, indexed, err := loadState(tx, spaceKey(w.sp))
		if indexed || err != nil {
			t.Fatalf("after the downgrade: indexed = %v, err %v; want not indexed and no error", indexed, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if older := snapshot(t, w.db, w.sp, reqs); !reflect.DeepEqual(older, before) {
		t.Fatal("an older store answers differently")
	}
	// The first write builds the index: one that retires a fact of the
	// older store, whose entry is rebuilt from its JSON.
	w.update(func(tx kv.Tx) error {
		p, err := w.o.Write(tx, w.sp, Input{Op: OpRemember, Subject: "zz", Value: "new", Confidence: DefaultConfidence, Kind: KindState}, w.now)
		if err == nil && p.Action != ActionSupersede {
			t.Fatalf("action %s, want %s", p.Action, ActionSupersede)
		}
		return err
	})
	err = w.db.View(context.Background(), func(tx kv.Tx) error {
		checkIndex(t, tx, w.sp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The rebuilt index answers as the older store's scan does.
	after := snapshot(t, w.db, w.sp, reqs)
	toV1(t, w.db)
	if older := snapshot(t, w.db, w.sp, reqs); !reflect.DeepEqual(after, older) {
		t.Fatal("the rebuilt index answers differently")
	}
}

// TestApplyTerm applies random merges to one term's blocks and checks them
// against a model: the postings, and blocks of at most maxBlock postings,
// ordered and not overlapping.
func TestApplyTerm(t *testing.T) {
	t.Parallel()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := rand.New(rand.NewPCG(7, 7))
	prefix := termPrefix(spaceKey(Space{UserID: "u"}), tagWord, "term")
	model := map[uint64]byte{}
	next := uint64(1000)
	for round := range 300 {
		e := &termEdit{}
		seen := map[uint64]bool{}
		switch round % 3 {
		case 0: // new facts only: the append path
			for range r.IntN(300) {
				next += 1 + r.Uint64N(3)
				e.add = append(e.add, posting{next, byte(r.IntN(8))})
			}
		default: // anything: old ids removed, re-masked or added back, new ids before the first
			for range r.IntN(200) {
				id := r.Uint64N(next + 50)
				if seen[id] {
					continue
				}
				seen[id] = true
				if _, ok := model[id]; ok && r.IntN(2) == 0 {
					e.del = append(e.del, id)
				} else {
					e.add = append(e.add, posting{id, byte(r.IntN(8))})
				}
			}
		}
		for _, id := range e.del {
			delete(model, id)
		}
		for _, p := range e.add {
			model[p.id] = p.mask
		}
		err := db.Update(context.Background(), func(tx kv.Tx) error { return applyTerm(tx, prefix, e) })
		if err != nil {
			t.Fatal(err)
		}
		got := map[uint64]byte{}
		var lastEnd uint64
		first := true
		err = db.View(context.Background(), func(tx kv.Tx) error {
			return kv.Prefix(tx, bucketRecall, prefix, func(k, v []byte) error {
				start := kv.ParseU64(k[len(prefix):])
				ps, err := decodeBlock(nil, start, v)
				if err != nil {
					return err
				}
				if len(ps) == 0 || len(ps) > maxBlock || ps[0].id < start || (!first && start <= lastEnd) {
					t.Fatalf("round %d: block at %d: %d postings, first #%d, previous ended at #%d; want 1 to %d postings, the first at #%d or later, the block after the previous", round, start, len(ps), ps[0].id, lastEnd, maxBlock, start)
				}
				first = false
				for i, p := range ps {
					if i > 0 && p.id <= ps[i-1].id {
						t.Fatalf("round %d: block at %d unsorted", round, start)
					}
					got[p.id] = p.mask
				}
				lastEnd = ps[len(ps)-1].id
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, model) {
			t.Fatalf("round %d: the blocks hold %d postings, the model %d; want the blocks to hold the model's postings", round, len(got), len(model))
		}
	}
}

// content is a decoded index content.
type content struct {
	category string
	words    []string
	masks    []byte
}

func decodeContent(v []byte) (content, error) {
	var c content
	cat, err := scanContent(v, func(w []byte, m byte) {
		c.words = append(c.words, string(w))
		c.masks = append(c.masks, m)
	})
	c.category = string(cat)
	return c, err
}

// TestRecallWithoutIndex drops every index (as a version of Countersign
// that predates the index leaves a store): the answers stay the same (by
// scan) and the next write rebuilds the space's index.
func TestRecallWithoutIndex(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 9)
	for range 500 {
		w.step()
	}
	var reqs []RecallRequest
	for range 20 {
		reqs = append(reqs, w.request())
	}
	before := snapshot(t, w.db, w.sp, reqs)
	w.update(dropRecallIndex)
	err := w.db.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend(bucketRecall, nil, nil, func(k, _ []byte) error {
			t.Fatalf("key %q left, want the recall index empty", k)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, w.db, w.sp, reqs); !reflect.DeepEqual(got, before) {
		t.Fatal("answers changed with the index dropped")
	}
	w.update(func(tx kv.Tx) error {
		_, err := w.o.Write(tx, w.sp, Input{Op: OpRemember, Subject: "zz", Value: "v", Confidence: DefaultConfidence, Kind: KindState}, w.now)
		return err
	})
	err = w.db.View(context.Background(), func(tx kv.Tx) error {
		st, ok, err := loadState(tx, spaceKey(w.sp))
		if err != nil || !ok || st.mode != modeIndexed {
			t.Fatalf("not rebuilt: state %+v, found %v, err %v; want mode %d (indexed)", st, ok, err, modeIndexed)
		}
		checkIndex(t, tx, w.sp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dropRecallIndex deletes the recall index of every space.
func dropRecallIndex(tx kv.Tx) error {
	for {
		var keys [][]byte
		if err := tx.Ascend(bucketRecall, nil, nil, func(k, _ []byte) error {
			keys = append(keys, bytes.Clone(k))
			if len(keys) == 4096 {
				return kv.ErrStop
			}
			return nil
		}); err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		for _, k := range keys {
			if err := tx.Delete(bucketRecall, k); err != nil {
				return err
			}
		}
	}
}
