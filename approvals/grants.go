package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// GrantKind is how long a standing grant lasts.
type GrantKind string

// The kinds of grant.
const (
	// GrantOnce approves the next matching call only, within the tool's
	// maximum: the first use ends it.
	GrantOnce GrantKind = "once"
	// GrantSession approves matching calls of the agent's session: the
	// same agent principal in the same memory space (user_id, agent_id)
	// with the same run_id as the request the grant was made on, until the
	// tool's maximum has passed.
	GrantSession GrantKind = "session"
	// GrantDuration approves matching calls of the agent in the same memory
	// space (user_id, agent_id; any run_id) until an expiry the approver
	// chose, at most the tool's maximum.
	GrantDuration GrantKind = "duration"
)

// GrantKinds are the kinds in the order they are offered.
var GrantKinds = []GrantKind{GrantOnce, GrantSession, GrantDuration}

// ParseGrantKind reads a grant kind; anything else is an error naming the
// kinds.
func ParseGrantKind(s string) (GrantKind, error) {
	k := GrantKind(s)
	if slices.Contains(GrantKinds, k) {
		return k, nil
	}
	return "", fmt.Errorf("%q is not a grant kind; use once, session or duration", s)
}

// Grant is a standing approval a person made when approving a request: the
// calls of one tool by one agent principal in one memory space that match it
// are approved at once, until it expires, is used up (once) or revoked.
type Grant struct {
	ID   uint64    `json:"id"` // small, shown as "grant #4"
	Tool string    `json:"tool"`
	Kind GrantKind `json:"kind"`
	// Command is the allowlist entry of an exec-style call ("kubectl get");
	// a call matches only when it matched the same entry.
	Command string `json:"command,omitempty"`
	// ArgsSHA256 binds the grant to one exact argument hash. When it is
	// empty, Match binds it instead: every named argument must have exactly
	// the value (canonical JSON) the approver saw and confirmed.
	ArgsSHA256 string            `json:"args_sha256,omitempty"`
	Match      map[string]string `json:"match,omitempty"`
	// Agent is the principal id of the agent the grant applies to.
	Agent     string       `json:"agent"`
	AgentName string       `json:"agent_name,omitempty"`
	Space     policy.Space `json:"space"`

	CreatedBy   Party     `json:"created_by"`
	FromRequest string    `json:"from_request"`
	ItemID      uint64    `json:"item_id,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`

	Revoked   bool      `json:"revoked,omitempty"`
	RevokedBy Party     `json:"revoked_by,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	Uses      int       `json:"uses,omitempty"`
	LastUseAt time.Time `json:"last_use_at,omitzero"`
	// Spent are the uses a budget counts (budget.go), pruned to its
	// window at each use; Base the values of the arguments a budget holds
	// within a range, as approved when the grant was made.
	Spent []GrantUse         `json:"spent,omitempty"`
	Base  map[string]float64 `json:"base,omitempty"`
}

// Name is the grant as people see it: "grant #4".
func (g *Grant) Name() string { return "grant #" + strconv.FormatUint(g.ID, 10) }

// ConfirmedBy is the confirmed_by of a request the grant approved:
// "grant #4 by alice [prin_…]".
func (g *Grant) ConfirmedBy() string { return g.Name() + " by " + g.CreatedBy.Display }

// Live reports whether g can still approve a call at now: not revoked, not
// expired, and a once grant not yet used. A grant without an expiry is
// never live (fail closed).
func (g *Grant) Live(now time.Time) bool {
	switch {
	case g.Revoked, g.ExpiresAt.IsZero(), !now.Before(g.ExpiresAt):
		return false
	case g.Kind == GrantOnce && g.Uses > 0:
		return false
	}
	return slices.Contains(GrantKinds, g.Kind)
}

// GrantCall is a call as a grant sees it.
type GrantCall struct {
	Tool       string
	Command    string
	ArgsSHA256 string
	// Arguments are the call's canonical JSON arguments (an object).
	Arguments json.RawMessage
	Agent     string // the requester's principal id
	Space     policy.Space
}

// Matches reports whether g approves call at now. Matching is exact and
// fails closed: a dead grant, another tool, command, agent or space, a
// session grant outside its run, an argument missing or of another value,
// arguments that are not an object, or a grant with neither a hash nor a
// constraint all say no.
func (g *Grant) Matches(call GrantCall, now time.Time) bool {
	if !g.Live(now) || g.Agent == "" || g.Tool != call.Tool || g.Command != call.Command || g.Agent != call.Agent {
		return false
	}
	if g.Space.UserID != call.Space.UserID || g.Space.AgentID != call.Space.AgentID {
		return false
	}
	if g.Kind != GrantDuration && g.Space.RunID != call.Space.RunID {
		return false // once and session grants stay in their run
	}
	if g.ArgsSHA256 != "" {
		return g.ArgsSHA256 == call.ArgsSHA256
	}
	if len(g.Match) == 0 {
		return false
	}
	args, err := ArgumentValues(call.Arguments)
	if err != nil {
		return false
	}
	for name, want := range g.Match {
		got, ok := args[name]
		if !ok || got != want {
			return false
		}
	}
	return true
}

// ArgumentValues splits canonical JSON arguments (an object) into each
// argument's value as canonical JSON text. The values of a canonical object
// are canonical, so equal values have equal text.
func ArgumentValues(canonical json.RawMessage) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("the arguments are not a JSON object")
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out, nil
}

// Grant buckets.
const (
	bucketGrants     = "grants"      // big-endian id -> Grant JSON
	bucketGrantIndex = "grant_index" // agent id 0x00 tool 0x00 big-endian id -> nothing (live or not yet pruned)
)

func grantIndexKey(g *Grant) []byte {
	return kv.Join([]byte(g.Agent), []byte(g.Tool), kv.U64(g.ID))
}

// NewGrant stores g as a new grant under the next grant number, which it
// sets on g.
func NewGrant(tx kv.Tx, g *Grant) error {
	id, err := tx.NextSequence(bucketGrants)
	if err != nil {
		return err
	}
	g.ID = id
	if err := PutGrant(tx, g); err != nil {
		return err
	}
	return tx.Put(bucketGrantIndex, grantIndexKey(g), []byte{})
}

// PutGrant stores a changed grant; a grant that can no longer approve
// anything at now leaves the match index.
func PutGrant(tx kv.Tx, g *Grant) error {
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if err := tx.Put(bucketGrants, kv.U64(g.ID), b); err != nil {
		return err
	}
	if g.Revoked || (g.Kind == GrantOnce && g.Uses > 0) {
		return tx.Delete(bucketGrantIndex, grantIndexKey(g))
	}
	return nil
}

// LoadGrant reads grant id; nil if there is none.
func LoadGrant(tx kv.Tx, id uint64) (*Grant, error) {
	b, err := tx.Get(bucketGrants, kv.U64(id))
	if err != nil || b == nil {
		return nil, err
	}
	var g Grant
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("grant %d: %w", id, err)
	}
	return &g, nil
}

// FindGrant returns the live grant that approves call at now, or nil: of
// several, the oldest (the lowest number), so the choice is deterministic.
// It reads the store every time (no cache), so a revocation committed
// before is seen by the next call on every replica.
func FindGrant(tx kv.Tx, call GrantCall, now time.Time) (*Grant, error) {
	prefix := kv.Join([]byte(call.Agent), []byte(call.Tool), nil)
	var ids []uint64
	err := kv.Prefix(tx, bucketGrantIndex, prefix, func(k, _ []byte) error {
		if len(k) != len(prefix)+8 {
			return nil // another tool whose name extends this one's
		}
		ids = append(ids, kv.ParseU64(k[len(prefix):]))
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		g, err := LoadGrant(tx, id)
		if err != nil {
			return nil, err
		}
		if g != nil && g.Matches(call, now) {
			return g, nil
		}
	}
	return nil, nil
}

// ListGrants returns the grants for which keep is true, newest first, at
// most limit.
func ListGrants(tx kv.Tx, limit int, keep func(*Grant) bool) ([]Grant, error) {
	var out []Grant
	err := tx.Descend(bucketGrants, nil, nil, func(k, v []byte) error {
		var g Grant
		if err := json.Unmarshal(v, &g); err != nil {
			return fmt.Errorf("grant %d: %w", kv.ParseU64(k), err)
		}
		if keep(&g) {
			out = append(out, g)
			if len(out) >= limit {
				return kv.ErrStop
			}
		}
		return nil
	})
	return out, err
}

// MatchText renders a grant's binding for people: "args_sha256 ab12…" (the
// exact arguments) or
// "service=\"payments\", region=\"eu\"" (names sorted).
func (g *Grant) MatchText() string {
	if g.ArgsSHA256 != "" {
		return "args_sha256 " + g.ArgsSHA256
	}
	names := make([]string, 0, len(g.Match))
	for k := range g.Match {
		names = append(names, k)
	}
	sort.Strings(names)
	s := ""
	for i, k := range names {
		if i > 0 {
			s += ", "
		}
		s += k + "=" + g.Match[k]
	}
	return s
}

// PruneGrantIndex removes up to limit match-index entries of grants that
// can no longer approve anything at now (expired; used and revoked grants
// leave it when they change), so that confirm_action does not read them
// again. The grants themselves are kept: they are the record of what was
// approved under them. more reports that entries may remain.
func PruneGrantIndex(tx kv.Tx, now time.Time, limit int) (n int, more bool, err error) {
	var dead [][]byte
	err = tx.Ascend(bucketGrantIndex, nil, nil, func(k, _ []byte) error {
		if len(k) < 8 {
			return nil
		}
		g, err := LoadGrant(tx, kv.ParseU64(k[len(k)-8:]))
		if err != nil {
			return err
		}
		if g == nil || !g.Live(now) {
			dead = append(dead, append([]byte(nil), k...))
			if len(dead) >= limit {
				more = true
				return kv.ErrStop
			}
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	for _, k := range dead {
		if err := tx.Delete(bucketGrantIndex, k); err != nil {
			return 0, false, err
		}
	}
	return len(dead), more, nil
}
