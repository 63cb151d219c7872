package policy

// DefaultUserID is the user of a space that names none.
const DefaultUserID = "default"

// Space is a memory space: the user (optionally narrowed to one agent and
// one run) that facts, action requests, consent and audit entries belong
// to. Reconciliation, recall, history and approval modes never cross
// spaces, and a principal's scopes (InScope) name the users whose spaces
// it may act in.
//
// It is the one space type of every floor: memory stores facts under it,
// approvals files requests under it, bot's tools take it as arguments (the
// jsonschema tags describe them; every part is optional) and chat items
// carry it. Stored records written when each package had its own copy
// decode unchanged: the JSON names are the same, and a part written as ""
// reads as the omitted part it is now.
type Space struct {
	UserID  string `json:"user_id,omitempty" jsonschema:"the memory space's user (default \"default\")"`
	AgentID string `json:"agent_id,omitempty" jsonschema:"the memory space's agent (default \"\")"`
	RunID   string `json:"run_id,omitempty" jsonschema:"the memory space's run (default \"\")"`
}

// Normalized returns the space with defaults applied: a missing user is
// DefaultUserID.
func (s Space) Normalized() Space {
	if s.UserID == "" {
		s.UserID = DefaultUserID
	}
	return s
}

// Label names the space for people, the one way every surface shows it:
// "patient_42", "patient_42 · agent ward", "patient_42 · agent ward · run
// r7" (never the key form "patient_42//"). The parts are untrusted text:
// a renderer sanitises and escapes the label as it does any other.
func (s Space) Label() string {
	l := s.UserID
	if s.AgentID != "" {
		l += " · agent " + s.AgentID
	}
	if s.RunID != "" {
		l += " · run " + s.RunID
	}
	return l
}

// String renders the space as user/agent/run.
func (s Space) String() string { return s.UserID + "/" + s.AgentID + "/" + s.RunID }

// SpaceError names the part of a Space that is not valid, and why.
type SpaceError struct {
	Field   string // user_id, agent_id or run_id
	Problem string // what is wrong, for example "must be at most 128 bytes"
}

// Error returns "field: problem".
func (e *SpaceError) Error() string { return e.Field + ": " + e.Problem }

// Check checks that the space's parts cannot break a storage key: no
// control characters (in particular no NUL, the key separator), at most
// 128 bytes each, and a user (Normalized supplies the default). The error
// is a *SpaceError. (It is not named Validate: tool argument structs embed
// Space, and bot's decoder calls an argument struct's Validate, which would
// then check the space before its defaults are applied.)
func (s Space) Check() error {
	for _, f := range []struct{ name, v string }{{"user_id", s.UserID}, {"agent_id", s.AgentID}, {"run_id", s.RunID}} {
		if len(f.v) > 128 {
			return &SpaceError{Field: f.name, Problem: "must be at most 128 bytes"}
		}
		for _, r := range f.v {
			if r < 0x20 || r == 0x7f {
				return &SpaceError{Field: f.name, Problem: "must not contain control characters"}
			}
		}
	}
	if s.UserID == "" {
		return &SpaceError{Field: "user_id", Problem: "required"}
	}
	return nil
}
