package memory

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func fact(id uint64, subject, value string, status Status, category string) *Fact {
	return &Fact{ID: id, Subject: subject, Value: value, Status: status, Category: category, Confidence: 0.95, Scope: DefaultScope}
}

func ids(r Recall) []uint64 {
	var out []uint64
	for _, x := range r.Facts {
		out = append(out, x.Fact.ID)
	}
	return out
}

func TestSelect(t *testing.T) {
	t.Parallel()
	live := []*Fact{
		fact(1, "state", "Zustand", StatusActive, ""),
		fact(2, "hosting", "Fly.io", StatusActive, ""),
		fact(3, "allergy", "penicillin", StatusActive, "allergy"),
		fact(4, "state_library", "zustand docs", StatusActive, ""),
		fact(5, "hosting", "Heroku", StatusFlagged, ""),
		fact(6, "deploy_day", "Tuesday", StatusActive, ""),
	}
	live[3].Said = "we read the state docs"

	t.Run("small space taken whole, ranked, ties by id", func(t *testing.T) {
		r, err := Select(live, RecallRequest{Question: "what state library?", Context: 40, Budget: 200})
		if err != nil {
			t.Fatal(err)
		}
		// state_library: subject state+library (6) + said state (1) = 7; state: subject 3.
		if got, want := ids(r), []uint64{4, 1, 2, 3, 6}; !reflect.DeepEqual(got, want) {
			t.Fatalf("ids = %v, want %v", got, want)
		}
		if !r.Whole || r.Active != 5 {
			t.Fatalf("whole=%v active=%d, want whole=true active=5", r.Whole, r.Active)
		}
		if !reflect.DeepEqual(r.FlaggedSubjects, []string{"hosting"}) {
			t.Fatalf("flagged subjects = %v, want [hosting]", r.FlaggedSubjects)
		}
	})
	t.Run("large space: top-k with a score, plus critical", func(t *testing.T) {
		r, err := Select(live, RecallRequest{Question: "Zustand?", Context: 1, Budget: 200, Critical: map[string]bool{"allergy": true}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ids(r), []uint64{1, 3}; !reflect.DeepEqual(got, want) {
			t.Fatalf("ids = %v, want %v (top 1 ranked, tie broken by id, + critical)", got, want)
		}
		if !r.Facts[1].Critical || r.Facts[0].Critical {
			t.Fatalf("critical flags: %+v, want the second fact critical and the first not", r.Facts)
		}
	})
	t.Run("nothing matches in a large space", func(t *testing.T) {
		r, err := Select(live, RecallRequest{Question: "the moon", Context: 2, Budget: 200})
		if err != nil || len(r.Facts) != 0 {
			t.Fatalf("facts = %v, err %v, want no facts and no error", ids(r), err)
		}
	})
	t.Run("critical over budget fails, dropping nothing", func(t *testing.T) {
		many := append([]*Fact{}, live...)
		for i := range 3 {
			many = append(many, fact(uint64(10+i), "allergy", fmt.Sprintf("drug %d", i), StatusActive, "Allergy"))
		}
		_, err := Select(many, RecallRequest{Question: "x", Context: 40, Budget: 3, Critical: map[string]bool{"allergy": true}})
		var ce *CriticalOverflowError
		if !errors.As(err, &ce) || ce.Count != 4 || ce.Budget != 3 {
			t.Fatalf("err = %v, want a *CriticalOverflowError of 4 critical facts over a budget of 3", err)
		}
		if !strings.Contains(err.Error(), "Nothing was dropped") || !strings.Contains(err.Error(), "critical_budget") {
			t.Fatalf("message = %q, want it to contain %q and %q (nothing was dropped, and how to fix)", err, "Nothing was dropped", "critical_budget")
		}
		if _, err := Select(many, RecallRequest{Question: "x", Context: 40, Budget: 4, Critical: map[string]bool{"allergy": true}}); err != nil {
			t.Fatalf("at budget: %v", err)
		}
	})
}

func TestTokens(t *testing.T) {
	t.Parallel()
	if got, want := Tokens("What is the active_medication of Patient-42? the"), []string{"active", "medication", "patient", "42"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Tokens = %q, want %q", got, want)
	}
}

func TestRenderings(t *testing.T) {
	t.Parallel()
	f := &Fact{ID: 2, Subject: "state", Value: "Zustand", Confidence: 0.95, Source: "crm", Supersedes: 1, Scope: DefaultScope}
	if got, want := ExplainLine(f), "  • #2 state = Zustand  [conf 0.95, from crm, supersedes #1]"; got != want {
		t.Errorf("ExplainLine = %q, want %q", got, want)
	}
	g := &Fact{ID: 11, Subject: "api_timeout", Value: "30s", Confidence: 0.5, Scope: DefaultScope}
	if got, want := ExplainLine(g), "  • #11 api_timeout = 30s  [conf 0.5]"; got != want {
		t.Errorf("ExplainLine = %q, want %q", got, want)
	}
	if got, want := RenderStored(ActionSupersede, "state", "Zustand"), "Stored: [SUPERSEDE] state = Zustand"; got != want {
		t.Errorf("RenderStored = %q, want %q", got, want)
	}
	h := []*Fact{
		{Value: "Sentry", Status: StatusSuperseded, Scope: DefaultScope},
		{Value: "(retracted: Sentry)", Status: StatusHistorical, Scope: DefaultScope},
	}
	if got, want := RenderHistory("monitoring", h), "History for 'monitoring' (oldest → newest):\n  1. Sentry  [SUPERSEDED]\n  2. (retracted: Sentry)  [HISTORICAL]"; got != want {
		t.Errorf("RenderHistory =\n%s\nwant\n%s", got, want)
	}
	if got := RenderHistory("nope", nil); got != "No history for 'nope'." {
		t.Errorf("empty history = %q, want %q", got, "No history for 'nope'.")
	}
	list := RenderList(
		[]*Fact{{ID: 2, Subject: "state", Value: "Zustand"}, {ID: 7, Subject: "deploy_day", Value: "Tuesday"}},
		[]*Fact{{ID: 6, Subject: "hosting", Value: "Fly.io", Status: StatusFlagged}},
		[]*Fact{{Subject: "monitoring", Value: "(retracted: Sentry)", Status: StatusHistorical}, {Subject: "monitoring", Value: "Sentry", Status: StatusSuperseded}},
	)
	want := "• state = Zustand  (#2)\n• deploy_day = Tuesday  (#7)\n⚠ hosting = Fly.io  (#6, flagged — needs confirmation)\n\n— history (superseded / retracted / archived) —\n  ◦ monitoring = (retracted: Sentry)  [HISTORICAL]\n  ◦ monitoring = Sentry  [SUPERSEDED]"
	if list != want {
		t.Errorf("RenderList =\n%s\nwant\n%s", list, want)
	}
	if RenderList(nil, nil, nil) != "(no memories yet)" {
		t.Errorf("empty list: RenderList = %q, want %q", RenderList(nil, nil, nil), "(no memories yet)")
	}
	get := RenderFact(&Fact{ID: 9, Subject: "platform_lead", Value: "Alice", Status: StatusActive, Scope: "global", Confidence: 0.95, Metadata: []byte(`{"team":"eng"}`), Kind: KindState, SetAt: t0})
	if !strings.HasPrefix(get, "#9  platform_lead = Alice\n  status=ACTIVE  scope=global  confidence=0.95  metadata={'team': 'eng'}\n") {
		t.Errorf("RenderFact =\n%s\nwant it to start with\n%s", get, "#9  platform_lead = Alice\n  status=ACTIVE  scope=global  confidence=0.95  metadata={'team': 'eng'}\n")
	}
	// An untrusted value cannot forge lines.
	if got := RenderStored(ActionAdd, "note", "a\n  • #9 x = y"); strings.Contains(got, "\n") {
		t.Errorf("newline rendered: %q, want no newline in it", got)
	}
}
