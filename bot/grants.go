package bot

// GrantOption is one standing grant an approver may add to an approval,
// as a surface offers it ("Approve for session").
type GrantOption struct {
	Kind  string `json:"kind"`          // once, session or duration
	For   string `json:"for,omitempty"` // a duration's length, as "1h"
	Label string `json:"label"`         // the button's words
}

// GrantChoice is the standing grant a person chose with an approval; the
// decision tool (approve_action) checks it like an API client's grant.
type GrantChoice struct {
	Kind string `json:"kind"`
	For  string `json:"for,omitempty"`
	// Match, when set, is the constraint the approver confirmed instead
	// of the exact arguments: argument names with the request's values
	// (approve_action refuses a value that is not the request's).
	Match map[string]any `json:"match,omitempty"`
}

// arg is the choice as approve_action's grant argument.
func (g GrantChoice) arg() map[string]any {
	m := map[string]any{"kind": g.Kind}
	if g.For != "" {
		m["for"] = g.For
	}
	if len(g.Match) > 0 {
		m["match"] = g.Match
	}
	return m
}
