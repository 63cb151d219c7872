package policy

import (
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 9, 26, 12, 0, 0, 0, time.UTC)

func days(d float64) time.Duration { return time.Duration(d * 24 * float64(time.Hour)) }

func active(conf float64, setAt time.Time, supersedes uint64) FactState {
	return FactState{ID: 1, Subject: "s", Value: "v", Status: StatusActive, Confidence: conf, SetAt: setAt, Supersedes: supersedes}
}

func TestCheckBeforeAct(t *testing.T) {
	def := DefaultSafetyPolicy()
	with := func(f func(*SafetyPolicy)) SafetyPolicy { p := def; f(&p); return p }
	flagged := FactState{ID: 2, Subject: "s", Value: "w", Status: StatusFlagged, Confidence: 0.95, SetAt: t0}
	tests := []struct {
		name    string
		facts   []FactState
		p       SafetyPolicy
		want    Verdict
		reasons []string
	}{
		{"safe", []FactState{active(0.95, t0, 0)}, def, VerdictSafe, nil},
		{"no facts", nil, def, VerdictBlocked, []string{"no active fact for this subject — nothing safe to act on"}},
		{"only flagged", []FactState{flagged}, def, VerdictBlocked, []string{
			"no active fact for this subject — nothing safe to act on",
			"unresolved conflict (FLAGGED) — the value is disputed"}},
		{"flagged beside active", []FactState{active(0.95, t0, 0), flagged}, def, VerdictBlocked, []string{
			"unresolved conflict (FLAGGED) — the value is disputed"}},
		{"two proposals list the reason once", []FactState{active(0.95, t0, 0), flagged, flagged}, def, VerdictBlocked, []string{
			"unresolved conflict (FLAGGED) — the value is disputed"}},
		{"flagged ignored when not blocking on flags", []FactState{active(0.95, t0, 0), flagged}, with(func(p *SafetyPolicy) { p.BlockOnFlagged = false }), VerdictSafe, nil},
		{"low confidence", []FactState{active(0.5, t0, 0)}, def, VerdictBlocked, []string{"confidence 0.5 < required 0.7"}},
		{"confidence rounds to 2 dp", []FactState{active(0.333333, t0, 0)}, def, VerdictBlocked, []string{"confidence 0.33 < required 0.7"}},
		{"confidence at the bar passes", []FactState{active(0.7, t0, 0)}, def, VerdictSafe, nil},
		{"custom bar printed as passed", []FactState{active(0.95, t0, 0)}, with(func(p *SafetyPolicy) { p.MinConfidence = 1 }), VerdictBlocked, []string{"confidence 0.95 < required 1"}},
		{"stale", []FactState{active(0.95, t0.Add(-days(120)), 0)}, with(func(p *SafetyPolicy) { p.MaxStalenessDays = 90 }), VerdictBlocked, []string{"stale: last set 120d ago > 90d limit"}},
		{"stale age truncated", []FactState{active(0.95, t0.Add(-days(90.9)), 0)}, with(func(p *SafetyPolicy) { p.MaxStalenessDays = 90 }), VerdictBlocked, []string{"stale: last set 90d ago > 90d limit"}},
		{"fresh enough", []FactState{active(0.95, t0.Add(-days(89)), 0)}, with(func(p *SafetyPolicy) { p.MaxStalenessDays = 90 }), VerdictSafe, nil},
		{"staleness window off at zero", []FactState{active(0.95, t0.Add(-days(5000)), 0)}, with(func(p *SafetyPolicy) { p.MaxStalenessDays = 0 }), VerdictSafe, nil},
		{"staleness window off below zero", []FactState{active(0.95, t0.Add(-days(5000)), 0)}, with(func(p *SafetyPolicy) { p.MaxStalenessDays = -1 }), VerdictSafe, nil},
		{"recent change", []FactState{active(0.95, t0, 1)}, with(func(p *SafetyPolicy) { p.BlockOnRecentChangeDays = 1 }), VerdictBlocked, []string{"recently changed 0.0d ago — may be unsettled"}},
		{"recent change half a day", []FactState{active(0.95, t0.Add(-12*time.Hour), 1)}, with(func(p *SafetyPolicy) { p.BlockOnRecentChangeDays = 1 }), VerdictBlocked, []string{"recently changed 0.5d ago — may be unsettled"}},
		{"recent change quarter day", []FactState{active(0.95, t0.Add(-6*time.Hour), 1)}, with(func(p *SafetyPolicy) { p.BlockOnRecentChangeDays = 1 }), VerdictBlocked, []string{"recently changed 0.25d ago — may be unsettled"}},
		{"settled change", []FactState{active(0.95, t0.Add(-days(2)), 1)}, with(func(p *SafetyPolicy) { p.BlockOnRecentChangeDays = 1 }), VerdictSafe, nil},
		{"first value never trips recent change", []FactState{active(0.95, t0, 0)}, with(func(p *SafetyPolicy) { p.BlockOnRecentChangeDays = 1 }), VerdictSafe, nil},
		{"recent window off", []FactState{active(0.95, t0, 1)}, with(func(p *SafetyPolicy) { p.BlockOnRecentChangeDays = -3 }), VerdictSafe, nil},
		{"set in the future counts as just set", []FactState{active(0.95, t0.Add(time.Hour), 1)}, with(func(p *SafetyPolicy) { p.BlockOnRecentChangeDays = 1 }), VerdictBlocked, []string{"recently changed 0.0d ago — may be unsettled"}},
		{"retired", []FactState{active(0.95, t0, 0), {ID: 3, Subject: "s", Status: "SUPERSEDED", Confidence: 0.95, SetAt: t0}}, def, VerdictBlocked, []string{"not current (status SUPERSEDED) — acting on a retired value"}},
		{"retired allowed", []FactState{active(0.95, t0, 0), {ID: 3, Subject: "s", Status: "SUPERSEDED", Confidence: 0.95, SetAt: t0}}, with(func(p *SafetyPolicy) { p.RequireActive = false }), VerdictSafe, nil},
		{"every reason, in order, once", []FactState{active(0.5, t0.Add(-days(200)), 0), flagged, active(0.5, t0.Add(-days(300)), 0)},
			with(func(p *SafetyPolicy) { p.MaxStalenessDays = 90 }), VerdictBlocked, []string{
				"confidence 0.5 < required 0.7",
				"stale: last set 200d ago > 90d limit",
				"unresolved conflict (FLAGGED) — the value is disputed",
				"stale: last set 300d ago > 90d limit"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, r := CheckBeforeAct(tc.facts, tc.p, t0)
			if v != tc.want || !reflect.DeepEqual(r, tc.reasons) {
				t.Errorf("CheckBeforeAct = %s %q, want %s %q", v, r, tc.want, tc.reasons)
			}
		})
	}
}

func TestSafeRecall(t *testing.T) {
	def := DefaultSafetyPolicy()
	tests := []struct {
		name    string
		ctx     []FactState
		flagged []string
		p       SafetyPolicy
		want    Verdict
		reasons []string
	}{
		{"answered", []FactState{active(0.95, t0, 0)}, nil, def, VerdictAnswered, nil},
		{"nothing behind it", nil, nil, def, VerdictWithheld, []string{"no current fact supports this — nothing safe to act on"}},
		{"low confidence", []FactState{active(0.95, t0, 0), active(0.5, t0, 0)}, nil, def, VerdictWithheld, []string{"confidence 0.5 < required 0.7"}},
		{"flagged subject", []FactState{active(0.95, t0, 0)}, []string{"active_medication"}, def, VerdictWithheld, []string{"unresolved conflict on 'active_medication' — the value is disputed"}},
		{"flagged subject ignored when not blocking", []FactState{active(0.95, t0, 0)}, []string{"x"}, SafetyPolicy{MinConfidence: 0.7, RequireActive: true}, VerdictAnswered, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, r := SafeRecall(tc.ctx, tc.flagged, tc.p, t0)
			if v != tc.want || !reflect.DeepEqual(r, tc.reasons) {
				t.Errorf("SafeRecall = %s %q, want %s %q", v, r, tc.want, tc.reasons)
			}
		})
	}
}

func TestRender(t *testing.T) {
	tests := []struct{ got, want string }{
		{RenderCheck("state", VerdictSafe, nil, []string{"state = Zustand"}), "✅ SAFE to act on 'state'.\n  current: state = Zustand"},
		{RenderCheck("active_medication", VerdictSafe, nil, []string{"active_medication = metformin 500 mg PO twice daily", "active_medication = warfarin 7 mg PO daily"}),
			"✅ SAFE to act on 'active_medication'.\n  current: active_medication = metformin 500 mg PO twice daily; active_medication = warfarin 7 mg PO daily"},
		{RenderCheck("api_timeout", VerdictBlocked, []string{"confidence 0.5 < required 0.7"}, nil), "⛔ BLOCKED — do NOT act on 'api_timeout':\n  • confidence 0.5 < required 0.7"},
		{RenderWithheld([]string{"confidence 0.5 < required 0.7"}), "⛔ WITHHELD — not safe to act on this answer:\n  • confidence 0.5 < required 0.7"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got\n%s\nwant\n%s", tc.got, tc.want)
		}
	}
}

func TestNumberFormats(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{Conf(0.5), "0.5"}, {Conf(0.95), "0.95"}, {Conf(1), "1.0"}, {Conf(0), "0.0"},
		{Conf(0.125), "0.12"}, // half to even on the exact value, as Python's round
		{Conf(0.005), "0.01"}, {Conf(0.3333), "0.33"}, {Conf(0.001), "0.0"},
		{Limit(0.7), "0.7"}, {Limit(90), "90"}, {Limit(1.5), "1.5"},
		{reasonStale(120.99, 90), "stale: last set 120d ago > 90d limit"},
		{reasonRecent(0), "recently changed 0.0d ago — may be unsettled"},
		{reasonRecent(1.5), "recently changed 1.5d ago — may be unsettled"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
