package memorytools

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// The gates' hand-written JSON is held to encoding/json's (Encoder,
// SetEscapeHTML(false): what the HTTP edge wrote before), byte for byte,
// on a table and on answers generated from fuzzed seeds: the contract of
// the answer cannot drift from its struct tags.

func wantJSON(t testing.TB, v any) (string, error) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n"), err
}

func checkAnswer(t testing.TB, d bot.JSONAppender) {
	t.Helper()
	want, werr := wantJSON(t, d)
	got, err := d.AppendJSON(nil)
	if (err != nil) != (werr != nil) || (err == nil && string(got) != want) {
		t.Fatalf("AppendJSON:\n%s (%v)\nwant, as encoding/json:\n%s (%v)", got, err, want, werr)
	}
	// And inside the envelope, as the HTTP edge sends it.
	r := bot.Result{Text: "✅ SAFE <x> & \"y\"\n", Data: d}
	want, werr = wantJSON(t, r)
	env, ok, err := bot.AppendResultJSON(nil, r)
	if !ok || (err != nil) != (werr != nil) || (err == nil && string(env) != want) {
		t.Fatalf("envelope (ok %v):\n%s (%v)\nwant, as encoding/json:\n%s (%v)", ok, env, err, want, werr)
	}
}

var answerStrings = []string{"", "aspirin", "<b>&\"q\"\\", "line\nbreak\t\x00\x1f\x7f", "é 中 🙂 \u2028", "bad \xff utf-8"}

// genFact makes a fact answer from r: every field set or left empty.
func genFact(r *rand.Rand) factData {
	s := func() string {
		if r.IntN(4) == 0 {
			return ""
		}
		if r.IntN(3) == 0 {
			b := make([]byte, r.IntN(12))
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			return string(b)
		}
		return answerStrings[r.IntN(len(answerStrings))]
	}
	u := func() uint64 {
		if r.IntN(2) == 0 {
			return 0
		}
		return r.Uint64() >> r.IntN(64)
	}
	tm := func() time.Time {
		if r.IntN(4) == 0 {
			return time.Time{}
		}
		return time.Unix(r.Int64N(400_000_000_000)-100_000_000_000, r.Int64N(1e9)).In(time.FixedZone("z", (r.IntN(48)-24)*1800))
	}
	conf := []float64{0, 1, 0.95, 0.5, 1e-7, 1.0 / 3, r.Float64(), math.Float64frombits(r.Uint64())}[r.IntN(8)]
	d := factData{Provenance: memory.Provenance{
		ID: u(), Subject: s(), Value: s(), Scope: s(), Kind: memory.Kind(s()), Status: memory.Status(s()),
		Confidence: conf, Supersedes: u(), Source: s(), Category: s(), Said: s(), SetAt: tm(), RetiredAt: tm(), Pending: memory.Action(s()),
	}, Archived: r.IntN(2) == 0, Tombstone: r.IntN(3) == 0}
	if r.IntN(3) == 0 {
		d.Metadata = map[string]any{"z": 1.5, "a": []any{"<&>", nil, true}, s(): map[string]any{"n": s()}}
	}
	if r.IntN(2) == 0 {
		d.Proposal = &proposalData{Change: s(), Status: s(), Held: s(), Target: u(), ProposedBy: s(), ProposedAt: s(),
			DecidedBy: s(), Assurance: s(), Note: s(), Reason: s(), ItemID: u()}
	}
	return d
}

func genAnswers(seed uint64) (verdictData, safeRecallData) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	strs := func() []string {
		switch r.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+r.IntN(3))
		for i := range out {
			out[i] = answerStrings[r.IntN(len(answerStrings))]
		}
		return out
	}
	v := verdictData{Verdict: policy.Verdict(answerStrings[r.IntN(len(answerStrings))]), Reasons: strs(), Subject: answerStrings[r.IntN(len(answerStrings))]}
	if r.IntN(4) > 0 {
		v.Facts = make([]factData, r.IntN(4))
		for i := range v.Facts {
			v.Facts[i] = genFact(r)
		}
	}
	s := safeRecallData{Verdict: v.Verdict, Reasons: strs()}
	s.FlaggedSubjects, s.ActiveFacts, s.Whole = strs(), r.IntN(1000)-10, r.IntN(2) == 0
	if r.IntN(4) > 0 {
		s.Facts = make([]recalledData, r.IntN(4))
		for i := range s.Facts {
			s.Facts[i] = recalledData{factData: genFact(r), Score: r.IntN(200) - 100, Critical: r.IntN(2) == 0}
		}
	}
	return v, s
}

func TestGateAnswersMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	set := time.Date(2026, 12, 1, 16, 6, 50, 956354408, time.UTC)
	fact := factData{Provenance: memory.Provenance{ID: 3, Subject: "allergy", Value: "penicillin <anaphylaxis>", Scope: "global", Kind: "state",
		Status: memory.StatusActive, Confidence: 0.95, Said: "the nurse said so", SetAt: set}}
	checkAnswer(t, verdictData{Verdict: policy.VerdictSafe, Reasons: []string{}, Subject: "allergy", Facts: []factData{fact, fact}})
	checkAnswer(t, verdictData{Verdict: policy.VerdictBlocked, Reasons: []string{"• audit backlog"}, Subject: "x"})
	checkAnswer(t, safeRecallData{Verdict: policy.VerdictWithheld, Reasons: []string{"r"}, recallData: toRecallData(memory.Recall{})})
	checkAnswer(t, safeRecallData{Verdict: policy.VerdictSafe, Reasons: []string{}, recallData: recallData{
		Facts: []recalledData{{factData: fact, Score: 7, Critical: true}}, FlaggedSubjects: []string{"a"}, ActiveFacts: 10}})
	for seed := uint64(0); seed < 2000; seed++ {
		v, s := genAnswers(seed)
		checkAnswer(t, v)
		checkAnswer(t, s)
	}
}

func FuzzGateAnswersMatchEncodingJSON(f *testing.F) {
	f.Add(uint64(1))
	f.Add(uint64(77))
	f.Fuzz(func(t *testing.T, seed uint64) {
		v, s := genAnswers(seed)
		checkAnswer(t, v)
		checkAnswer(t, s)
	})
}
