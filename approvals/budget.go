package approvals

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file is the mechanics of bounded grants (issue 25, item 4): a
// tool's grants may carry a budget, and each use of a grant is checked
// against it and recorded on the grant in the confirming transaction, so
// replicas on one database share one count (a concurrent use on another
// replica conflicts and is re-run, never double-spent).

// GrantBudget bounds what a standing grant approves. Zero fields bound
// nothing.
type GrantBudget struct {
	// Uses is the most calls the grant approves per Per (0: no bound);
	// Per zero counts over the grant's life.
	Uses int
	Per  time.Duration
	// SumArgument names a numeric argument whose sum over the calls the
	// grant approves within SumPer (0: the grant's life) stays at most
	// SumMax ("refunds up to 500 a day").
	SumArgument string
	SumMax      float64
	SumPer      time.Duration
	// WithinArgument names a numeric argument that must stay within
	// WithinPercent of its value in the request the grant was made on
	// ("the dose within 10%").
	WithinArgument string
	WithinPercent  float64
}

// IsZero reports whether b bounds nothing.
func (b GrantBudget) IsZero() bool {
	return b.Uses == 0 && b.SumArgument == "" && b.WithinArgument == ""
}

// MaxGrantUses is the most uses a grant keeps on record for its budget:
// a use that would need more is refused (a person decides the call).
const MaxGrantUses = 1000

// GrantUse is one call a grant approved, as its budget counts it.
type GrantUse struct {
	At     time.Time `json:"at"`
	Amount float64   `json:"amount,omitempty"` // the budget's SumArgument of the call
}

// NumberArgument reads argument name of canonical JSON arguments as a
// number; ok is false when it is missing or not a number.
func NumberArgument(args json.RawMessage, name string) (float64, bool) {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return 0, false
	}
	v, ok := m[name].(float64)
	return v, ok && !math.IsNaN(v) && !math.IsInf(v, 0)
}

// Spend checks one more use of g, for a call with canonical arguments
// args at now, against budget b, and records it on g when b allows it.
// why says why b refuses (nothing is recorded then); left says what
// remains after this use ("4 of 5 uses left in this 1h; 150 of 500
// amount left in this 24h"), "" when b bounds nothing.
func (g *Grant) Spend(b GrantBudget, args json.RawMessage, now time.Time) (why, left string) {
	if b.IsZero() {
		g.Uses++
		g.LastUseAt = now
		return "", ""
	}
	window := max(b.Per, b.SumPer)
	if (b.Uses > 0 && b.Per == 0) || (b.SumArgument != "" && b.SumPer == 0) {
		window = 0 // a life-long count keeps every use
	}
	kept := slices.DeleteFunc(slices.Clone(g.Spent), func(u GrantUse) bool { return window > 0 && !u.At.After(now.Add(-window)) })
	if len(kept) >= MaxGrantUses {
		return fmt.Sprintf("%s has approved %d calls, the most a budgeted grant keeps count of", g.Name(), MaxGrantUses), ""
	}
	var parts []string
	if b.Uses > 0 {
		n := 0
		for _, u := range kept {
			if b.Per == 0 || u.At.After(now.Add(-b.Per)) {
				n++
			}
		}
		if n >= b.Uses {
			return fmt.Sprintf("%s has approved its %d calls %s", g.Name(), b.Uses, perText(b.Per)), ""
		}
		parts = append(parts, fmt.Sprintf("%d of %d uses left %s", b.Uses-n-1, b.Uses, perText(b.Per)))
	}
	amount := 0.0
	if b.SumArgument != "" {
		v, ok := NumberArgument(args, b.SumArgument)
		if !ok || v < 0 {
			return fmt.Sprintf("the budget of %s adds up %s, and this call's %s is not a number of at least 0", g.Name(), b.SumArgument, b.SumArgument), ""
		}
		spent := 0.0
		for _, u := range kept {
			if b.SumPer == 0 || u.At.After(now.Add(-b.SumPer)) {
				spent += u.Amount
			}
		}
		if spent+v > b.SumMax {
			return fmt.Sprintf("%s %s would bring %s's %s to %s, over its budget of %s %s", b.SumArgument, num(v), g.Name(), b.SumArgument, num(spent+v), num(b.SumMax), perText(b.SumPer)), ""
		}
		amount = v
		parts = append(parts, fmt.Sprintf("%s of %s %s left %s", num(b.SumMax-spent-v), num(b.SumMax), b.SumArgument, perText(b.SumPer)))
	}
	if b.WithinArgument != "" {
		base, ok := g.Base[b.WithinArgument]
		v, vok := NumberArgument(args, b.WithinArgument)
		if !ok || !vok {
			return fmt.Sprintf("the budget of %s holds %s within %s%% of the approved value, and the call or the grant has no number for it", g.Name(), b.WithinArgument, num(b.WithinPercent)), ""
		}
		if math.Abs(v-base) > math.Abs(base)*b.WithinPercent/100 {
			return fmt.Sprintf("%s %s is not within %s%% of %s, the value approved when %s was made", b.WithinArgument, num(v), num(b.WithinPercent), num(base), g.Name()), ""
		}
	}
	g.Spent = append(kept, GrantUse{At: now, Amount: amount})
	g.Uses++
	g.LastUseAt = now
	return "", strings.Join(parts, "; ")
}

// perText says a window: "in this 1h", or "over the grant's life".
func perText(d time.Duration) string {
	if d <= 0 {
		return "over the grant's life"
	}
	s := d.String()
	s = strings.TrimSuffix(strings.TrimSuffix(s, "0s"), "0m")
	return "in any " + s
}

// num renders a number briefly: 500, 12.5.
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
