package approvals

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

var gtSpace = policy.Space{UserID: "ward7", AgentID: "deployer", RunID: "run-1"}

func gtGrant(kind GrantKind) Grant {
	return Grant{
		ID: 4, Tool: "restart_service", Kind: kind, Agent: "prin_agent", Space: gtSpace,
		Match:     map[string]string{"service": `"payments"`},
		CreatedBy: rqAlice, FromRequest: "req_0123456789abcdef",
		CreatedAt: rqT0, ExpiresAt: rqT0.Add(time.Hour),
	}
}

func gtCall(args string) GrantCall {
	return GrantCall{Tool: "restart_service", Agent: "prin_agent", Space: gtSpace, Arguments: json.RawMessage(args), ArgsSHA256: "h1"}
}

func TestGrantMatches(t *testing.T) {
	in := rqT0.Add(10 * time.Minute)
	tests := []struct {
		name  string
		grant func(*Grant)
		call  func(*GrantCall)
		at    time.Time
		want  bool
	}{
		{name: "the same service matches", want: true},
		{name: "another value of the constrained argument", call: func(c *GrantCall) { c.Arguments = json.RawMessage(`{"service":"billing"}`) }},
		{name: "the constrained argument missing", call: func(c *GrantCall) { c.Arguments = json.RawMessage(`{"region":"eu"}`) }},
		{name: "the value as a number is not the string", grant: func(g *Grant) { g.Match = map[string]string{"n": `1`} }, call: func(c *GrantCall) { c.Arguments = json.RawMessage(`{"n":"1"}`) }},
		{name: "other arguments may vary", call: func(c *GrantCall) { c.Arguments = json.RawMessage(`{"reason":"oom","service":"payments"}`) }, want: true},
		{name: "arguments that are not an object", call: func(c *GrantCall) { c.Arguments = json.RawMessage(`["payments"]`) }},
		{name: "another tool", call: func(c *GrantCall) { c.Tool = "restart_services" }},
		{name: "another agent", call: func(c *GrantCall) { c.Agent = "prin_other" }},
		{name: "another user space", call: func(c *GrantCall) { c.Space.UserID = "ward8" }},
		{name: "another agent_id", call: func(c *GrantCall) { c.Space.AgentID = "other" }},
		{name: "a session grant outside its run", grant: func(g *Grant) { g.Kind = GrantSession }, call: func(c *GrantCall) { c.Space.RunID = "run-2" }},
		{name: "a session grant inside its run", grant: func(g *Grant) { g.Kind = GrantSession }, want: true},
		{name: "a once grant outside its run", grant: func(g *Grant) { g.Kind = GrantOnce }, call: func(c *GrantCall) { c.Space.RunID = "" }},
		{name: "a duration grant in another run", call: func(c *GrantCall) { c.Space.RunID = "run-9" }, want: true},
		{name: "a once grant used", grant: func(g *Grant) { g.Kind = GrantOnce; g.Uses = 1 }},
		{name: "a session grant used many times", grant: func(g *Grant) { g.Kind = GrantSession; g.Uses = 40 }, want: true},
		{name: "at the expiry", at: rqT0.Add(time.Hour)},
		{name: "just before the expiry", at: rqT0.Add(time.Hour - time.Nanosecond), want: true},
		{name: "no expiry is never live", grant: func(g *Grant) { g.ExpiresAt = time.Time{} }},
		{name: "revoked", grant: func(g *Grant) { g.Revoked = true }},
		{name: "an unknown kind", grant: func(g *Grant) { g.Kind = "always" }},
		{name: "neither hash nor constraint", grant: func(g *Grant) { g.Match = nil }},
		{name: "the exact hash", grant: func(g *Grant) { g.Match, g.ArgsSHA256 = nil, "h1" }, want: true},
		{name: "another hash", grant: func(g *Grant) { g.Match, g.ArgsSHA256 = nil, "h1" }, call: func(c *GrantCall) { c.ArgsSHA256 = "h2" }},
		{name: "the hash wins over a constraint", grant: func(g *Grant) { g.ArgsSHA256 = "h1" }, call: func(c *GrantCall) { c.ArgsSHA256 = "h2" }},
		{name: "another allowlisted command", grant: func(g *Grant) { g.Command = "kubectl get" }, call: func(c *GrantCall) { c.Command = "kubectl delete" }},
		{name: "no agent recorded", grant: func(g *Grant) { g.Agent = "" }, call: func(c *GrantCall) { c.Agent = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gtGrant(GrantDuration)
			if tt.grant != nil {
				tt.grant(&g)
			}
			c := gtCall(`{"service":"payments"}`)
			if tt.call != nil {
				tt.call(&c)
			}
			at := tt.at
			if at.IsZero() {
				at = in
			}
			if got := g.Matches(c, at); got != tt.want {
				t.Fatalf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGrantNames(t *testing.T) {
	g := gtGrant(GrantSession)
	if got := g.ConfirmedBy(); got != "grant #4 by alice [prin_a]" {
		t.Fatalf("ConfirmedBy = %q, want %q", got, "grant #4 by alice [prin_a]")
	}
	g.Match = map[string]string{"service": `"payments"`, "region": `"eu"`}
	if got := g.MatchText(); got != `region="eu", service="payments"` {
		t.Fatalf("MatchText = %q, want %q", got, `region="eu", service="payments"`)
	}
	for _, s := range []string{"once", "session", "duration"} {
		if _, err := ParseGrantKind(s); err != nil {
			t.Fatalf("ParseGrantKind(%q): %v", s, err)
		}
	}
	if _, err := ParseGrantKind("always"); err == nil {
		t.Fatal(`ParseGrantKind("always") err = nil, want an error`)
	}
}

// TestGrantStore stores grants in a real bbolt file: numbers count up,
// FindGrant picks the oldest match, a once grant used and a revoked grant
// stop matching and leave the index.
func TestGrantStore(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	at := rqT0.Add(time.Minute)
	err := db.Update(ctx, func(tx kv.Tx) error {
		for _, k := range []GrantKind{GrantOnce, GrantSession} {
			g := gtGrant(k)
			g.ID = 0
			if err := NewGrant(tx, &g); err != nil {
				return err
			}
		}
		other := gtGrant(GrantDuration)
		other.Tool = "restart_service_x" // a longer name with the same prefix
		return NewGrant(tx, &other)
	})
	if err != nil {
		t.Fatal(err)
	}
	find := func() *Grant {
		t.Helper()
		var g *Grant
		if err := db.View(ctx, func(tx kv.Tx) error {
			var err error
			g, err = FindGrant(tx, gtCall(`{"service":"payments"}`), at)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return g
	}
	use := func(g *Grant, revoke bool) {
		t.Helper()
		if err := db.Update(ctx, func(tx kv.Tx) error {
			if revoke {
				g.Revoked, g.RevokedBy, g.RevokedAt = true, rqBob, at
			} else {
				g.Uses++
			}
			return PutGrant(tx, g)
		}); err != nil {
			t.Fatal(err)
		}
	}
	g := find()
	if g == nil || g.ID != 1 || g.Kind != GrantOnce {
		t.Fatalf("first match = %+v, want grant #1 (once)", g)
	}
	use(g, false)
	g = find()
	if g == nil || g.ID != 2 {
		t.Fatalf("after the once grant was used: %+v, want grant #2", g)
	}
	use(g, true)
	if g := find(); g != nil {
		t.Fatalf("after revocation a grant still matches: #%d, want none", g.ID)
	}
	var live []Grant
	var indexed int
	if err := db.View(ctx, func(tx kv.Tx) error {
		var err error
		live, err = ListGrants(tx, 10, func(g *Grant) bool { return g.Live(at) })
		if err != nil {
			return err
		}
		return tx.Ascend(bucketGrantIndex, nil, nil, func(k, v []byte) error { indexed++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].ID != 3 {
		t.Fatalf("live grants = %+v, want only #3", live)
	}
	if indexed != 1 {
		t.Fatalf("index holds %d entries, want 1 (the used and the revoked grant left it)", indexed)
	}
	// At #3's expiry the sweeper's prune drops it from the index; the
	// grants stay.
	var pruned int
	if err := db.Update(ctx, func(tx kv.Tx) error {
		var err error
		pruned, _, err = PruneGrantIndex(tx, rqT0.Add(time.Hour), 10)
		return err
	}); err != nil || pruned != 1 {
		t.Fatalf("PruneGrantIndex = %d, %v; want 1", pruned, err)
	}
	var back *Grant
	_ = db.View(ctx, func(tx kv.Tx) error { back, _ = LoadGrant(tx, 2); return nil })
	if back == nil || !back.Revoked || back.RevokedBy.ID != rqBob.ID {
		t.Fatalf("grant #2 as stored: %+v, want it revoked by %s", back, rqBob.ID)
	}
}
