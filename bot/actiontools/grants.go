package actiontools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
	"github.com/countersign/countersign/receipt"
)

// GrantPolicy is a tool's grants: config: which standing grants an approver
// may make with an approval, and for how long at most. The zero value
// allows none.
type GrantPolicy struct {
	Max   time.Duration // the longest a grant of any kind lasts
	Allow []string      // once, session, duration
	// Budget bounds what each grant approves (uses per window, a sum of a
	// numeric argument, a range around the approved value); checked and
	// counted in the confirming transaction (approvals.Grant.Spend).
	Budget approvals.GrantBudget
}

// grantsOf compiles a tool's grant policy. A destructive tool, or one whose
// approvals need a quorum, never takes standing grants: a grant would
// approve later calls on one person's word.
func grantsOf(t ToolSpec, cat policy.Category) error {
	g := t.Grants
	if len(g.Allow) == 0 {
		if g.Max != 0 {
			return errors.New("grants.allow: list the kinds allowed (once, session, duration); max alone allows nothing")
		}
		return nil
	}
	var errs []error
	if cat == policy.CategoryDestructive {
		errs = append(errs, fmt.Errorf("grants: %s is destructive, and a destructive tool never takes standing grants: every call is reviewed with its dry run. Remove grants from this tool", t.Name))
	}
	for _, c := range t.Commands {
		if strings.EqualFold(strings.TrimSpace(c.Category), string(policy.CategoryDestructive)) {
			errs = append(errs, fmt.Errorf("grants: the command %q of %s is destructive, and a destructive call never takes standing grants. Split the destructive commands into a tool without grants", c.Command, t.Name))
		}
	}
	if len(t.Stages) > 0 {
		errs = append(errs, fmt.Errorf("grants: %s is signed off in stages, and a standing grant would approve later calls on one person's word, a path around them. Remove grants or stages", t.Name))
	}
	if t.Quorum > 1 {
		errs = append(errs, fmt.Errorf("grants: %s needs a quorum of %d, and a standing grant would approve later calls on one person's word, a path around the quorum. Remove grants or set quorum 1", t.Name, t.Quorum))
	}
	if g.Max <= 0 {
		errs = append(errs, errors.New("grants.max: required when grants are allowed: the longest a grant lasts, for example 8h"))
	}
	errs = append(errs, budgetErrors(g.Budget)...)
	for i, k := range g.Allow {
		if _, err := approvals.ParseGrantKind(k); err != nil {
			errs = append(errs, fmt.Errorf("grants.allow[%d]: %v", i, err))
		}
	}
	return errors.Join(errs...)
}

// allows reports whether the tool's grant policy allows kind now.
func (d *toolDef) allowsGrant(k approvals.GrantKind) bool {
	return d != nil && d.spec.Grants.Max > 0 && d.spec.Quorum <= 1 &&
		d.category != policy.CategoryDestructive && slices.Contains(d.spec.Grants.Allow, string(k))
}

// GrantArgs are approve_action's grant argument.
type GrantArgs struct {
	Kind  string `json:"kind" jsonschema:"once (the next identical call), session (this agent's run: same run_id), or duration (until for has passed)"`
	For   string `json:"for,omitempty" jsonschema:"how long, as 30m or 1h: required for duration, at most the tool's grants.max; once and session last the tool's grants.max"`
	Match Object `json:"match,omitempty" jsonschema:"instead of the exact arguments: argument names with the exact values of this request that later calls must have (for example {\"service\": \"payments\"}); other arguments may vary"`
}

// validateGrant checks a grant argument's shape (the rest needs the request).
func validateGrant(g *GrantArgs) error {
	if g == nil {
		return nil
	}
	if _, err := approvals.ParseGrantKind(g.Kind); err != nil {
		return bot.Invalid("grant.kind", "%v", err)
	}
	if len(g.Match) > 20 {
		return bot.Invalid("grant.match", "names %d arguments; the limit is 20", len(g.Match))
	}
	return checkID("grant.for", g.For, 32)
}

// grantOnDecision makes the grant asked with an approval, in the deciding
// transaction, once the approval has decided the request: a grant is part
// of approving, so it is refused wherever approving is (the caller passed
// the one decision rule before this runs), and it takes effect only with
// the approval that decides the request. It returns the grant made, or nil
// when none was asked.
func (s *Service) grantOnDecision(tx *bot.Tx, c *bot.Call, r *approvals.Request, out approvals.Outcome, approve bool, ga *GrantArgs) (*approvals.Grant, error) {
	if ga == nil {
		return nil, nil
	}
	g, err := s.newGrant(c, r, approve, ga)
	if err != nil {
		return nil, err
	}
	switch {
	case out == approvals.OutcomeConflict:
		return nil, nil // the conflict is the answer
	case out != approvals.OutcomeDecided || r.Status != approvals.StatusApproved:
		return nil, bot.Invalid("grant", "no grant was made: %s is already approved, and a grant is made only with the approval that decides a request", r.ID)
	}
	if err := approvals.NewGrant(tx, g); err != nil {
		return nil, err
	}
	if err := tx.Audit("grant_created", fmt.Sprintf("%s by %s on %s: %s of %s for %s in %s until %s, %s",
		g.Name(), g.CreatedBy.Display, g.FromRequest, g.Kind, callName(g.Tool, g.Command), g.AgentName+" ["+g.Agent+"]",
		grantSpace(g), stamp(g.ExpiresAt), auditBinding(g))); err != nil {
		return nil, err
	}
	if g.ItemID != 0 {
		// The original card's thread says a grant was made, as it says
		// when one is used or revoked.
		if err := tx.Emit(g.ItemID, bot.EventNote, grantMadeNote(g, c.Now)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// grantMadeNote is the thread note of a grant being made: "alice granted
// #4: session, same arguments, until 15:04 UTC". A constraint is named by
// its arguments only (their values are on the card, or withheld there).
func grantMadeNote(g *approvals.Grant, now time.Time) string {
	who := g.CreatedBy.Name
	if who == "" {
		who = g.CreatedBy.Display
	}
	same := "same arguments"
	if g.ArgsSHA256 == "" {
		names := make([]string, 0, len(g.Match))
		for k := range g.Match {
			names = append(names, k)
		}
		slices.Sort(names)
		same = "same " + strings.Join(names, ", ") + ", other arguments may vary"
	}
	layout := "15:04 UTC"
	if exp := g.ExpiresAt.UTC(); exp.YearDay() != now.UTC().YearDay() || exp.Year() != now.UTC().Year() {
		layout = "2006-01-02 15:04 UTC"
	}
	return fmt.Sprintf("%s granted #%d: %s, %s, until %s.", who, g.ID, g.Kind, same, g.ExpiresAt.UTC().Format(layout))
}

// newGrant builds the grant ga asks for on r, or says why it is refused.
func (s *Service) newGrant(c *bot.Call, r *approvals.Request, approve bool, ga *GrantArgs) (*approvals.Grant, error) {
	if !approve {
		return nil, bot.Invalid("grant", "a grant comes only with an approval; a denial takes none")
	}
	if r.Action == nil {
		return nil, bot.Invalid("grant", "%s is a consent request; standing grants are made on action requests (confirm_action) only", r.ID)
	}
	if c.Caller == nil || c.Caller.Kind != "person" {
		return nil, bot.Errorf(bot.KindDenied, "Access denied: a standing grant is a person's decision; an agent or service key never makes one.")
	}
	kind, _ := approvals.ParseGrantKind(ga.Kind)
	def := s.def(r.Action.Tool)
	a := r.Action
	switch {
	case len(r.Stages) > 0:
		return nil, bot.Invalid("grant", "%s is signed off in stages, and a standing grant would approve later calls on one person's word. Approve without a grant", a.Tool)
	case r.StepUp > 0 || r.MinAssurance != "":
		return nil, bot.Invalid("grant", "%s requires step-up (a fresh sign-in for every approval), and a standing grant would approve later calls without one. Approve without a grant", a.Tool)
	case a.Edited:
		return nil, bot.Invalid("grant", "a standing grant is made only with an approval of the arguments the agent proposed, not with an edit: approve the edit without a grant (a later request with these arguments can take one)")
	case def == nil:
		return nil, bot.Invalid("grant", "%s is not declared under tools: in config.yaml, so it takes no standing grants; approve this request without one", a.Tool)
	case a.Category == string(policy.CategoryDestructive) || a.Mechanics == string(policy.MechanicsDryRunConfirm):
		return nil, bot.Invalid("grant", "%s is destructive, and a destructive call never takes a standing grant: every one is reviewed with its dry run. Approve this request without a grant", callName(a.Tool, a.Command))
	case r.Quorum > 1 || def.spec.Quorum > 1:
		return nil, bot.Invalid("grant", "%s needs a quorum of %d, and a standing grant would approve later calls on one person's word. Approve without a grant", a.Tool, max(r.Quorum, def.spec.Quorum))
	case len(def.spec.Grants.Allow) == 0:
		return nil, bot.Invalid("grant", "%s takes no standing grants (tools[].grants in config.yaml allows none); approve without one", a.Tool)
	case !def.allowsGrant(kind):
		return nil, bot.Invalid("grant.kind", "%s grants are not allowed for %s; it allows: %s", kind, a.Tool, strings.Join(def.spec.Grants.Allow, ", "))
	}
	maxFor := def.spec.Grants.Max
	life := maxFor
	switch {
	case kind == approvals.GrantDuration && ga.For == "":
		return nil, bot.Invalid("grant.for", "required for a duration grant: how long, as 30m or 1h (at most %s)", fmtDur(maxFor))
	case ga.For != "":
		d, err := time.ParseDuration(ga.For)
		if err != nil || d <= 0 {
			return nil, bot.Invalid("grant.for", "%q is not a duration; write it as 30m or 1h", ga.For)
		}
		if d > maxFor {
			return nil, bot.Invalid("grant.for", "%s is longer than %s allows: grants.max is %s", fmtDur(d), a.Tool, fmtDur(maxFor))
		}
		life = d
	}
	if kind == approvals.GrantSession && r.Space.RunID == "" {
		return nil, bot.Invalid("grant.kind", "a session grant binds the agent's run, and %s was asked without a run_id, so there is no session to bind; choose once or duration", r.ID)
	}
	g := &approvals.Grant{
		Tool: a.Tool, Kind: kind, Command: a.Command,
		Agent: r.Requester.ID, AgentName: r.Requester.Name, Space: r.Space,
		CreatedBy: principalParty(c.Caller), FromRequest: r.ID, ItemID: r.ItemID,
		CreatedAt: c.Now, ExpiresAt: c.Now.Add(life),
	}
	if b := def.spec.Grants.Budget; b.WithinArgument != "" {
		v, ok := approvals.NumberArgument(a.Arguments, b.WithinArgument)
		if !ok {
			return nil, bot.Invalid("grant", "the grants of %s hold %s within %s%% of the approved value, and %s's %s is not a number; approve without a grant", a.Tool, b.WithinArgument, fmtNum(b.WithinPercent), r.ID, b.WithinArgument)
		}
		g.Base = map[string]float64{b.WithinArgument: v}
	}
	if len(ga.Match) == 0 {
		g.ArgsSHA256 = a.ArgsSHA256
		return g, nil
	}
	have, err := approvals.ArgumentValues(a.Arguments)
	if err != nil {
		return nil, bot.Invalid("grant.match", "the request's arguments are not an object: %v", err)
	}
	g.Match = map[string]string{}
	for name, v := range ga.Match {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, bot.Invalid("grant.match."+name, "cannot be encoded: %v", err)
		}
		want, err := receipt.Canonical(raw)
		if err != nil {
			return nil, bot.Invalid("grant.match."+name, "%v", err)
		}
		got, ok := have[name]
		switch {
		case !ok:
			return nil, bot.Invalid("grant.match."+name, "%s has no argument %q; a constraint names arguments of the request you approve", r.ID, name)
		case got != string(want):
			return nil, bot.Invalid("grant.match."+name, "is %s, but %s has %s = %s: a constraint repeats the value you saw and approve", want, r.ID, name, got)
		}
		g.Match[name] = got
	}
	return g, nil
}

// grantFor approves r at once when a live grant covers it: the request's
// tool still allows the grant's kind, the call is not destructive, and the
// grant matches (approvals.Grant.Matches). It reads the grant from the
// store in the confirming transaction, so a revocation committed before is
// always seen. It reports whether r was approved.
func (s *Service) grantFor(tx *bot.Tx, c *bot.Call, r *approvals.Request, def *toolDef) (bool, error) {
	a := r.Action
	if def == nil || len(def.spec.Grants.Allow) == 0 || a.Mechanics == string(policy.MechanicsDryRunConfirm) ||
		a.Category == string(policy.CategoryDestructive) || r.Quorum > 1 || r.StepUp > 0 || r.MinAssurance != "" || len(r.Stages) > 0 {
		return false, nil // never a path around the dry run, the quorum, step-up or stages
	}
	g, err := approvals.FindGrant(tx, approvals.GrantCall{
		Tool: a.Tool, Command: a.Command, ArgsSHA256: a.ArgsSHA256, Arguments: a.Arguments,
		Agent: r.Requester.ID, Space: r.Space,
	}, c.Now)
	if err != nil || g == nil {
		return false, err
	}
	// The config may have narrowed since the grant was made: the kind must
	// still be allowed and the grant within the tool's max.
	if !def.allowsGrant(g.Kind) || !c.Now.Before(g.CreatedAt.Add(def.spec.Grants.Max)) {
		return false, nil
	}
	// A grant is its maker's standing decision: it lasts only while the
	// one decision rule would let them approve this request themselves.
	if ok, err := s.makerMayDecide(tx, g, r.Decidable()); err != nil || !ok {
		return false, err
	}
	// The budget is checked and counted here, in the confirming
	// transaction, on the grant's record: every replica counts on it.
	why, left := g.Spend(def.spec.Grants.Budget, a.Arguments, c.Now)
	if why != "" {
		if err := tx.Audit("grant_budget_spent", fmt.Sprintf("%s not used for %s: %s; a person decides", g.Name(), r.ID, why)); err != nil {
			return false, err
		}
		if g.ItemID != 0 {
			if err := tx.Emit(g.ItemID, bot.EventNote, fmt.Sprintf("%s did not approve %s: %s. A person decides it.", g.Name(), r.ID, why)); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	if err := approvals.PutGrant(tx, g); err != nil {
		return false, err
	}
	by := g.ConfirmedBy()
	r.Status = approvals.StatusApproved
	r.DecidedAt = c.Now
	r.DecidedBy = []string{by}
	r.ConfirmedBy = by
	r.GrantID = g.ID
	r.ExpiresAt = time.Time{}
	r.Reason = fmt.Sprintf("approved under %s (%s, made on %s)", g.Name(), g.Kind, g.FromRequest)
	if err := tx.Audit("action_approved_by_grant", fmt.Sprintf("%s %s by %s (%s, made on %s, use %d) args_sha256=%s",
		r.ID, callName(a.Tool, a.Command), by, g.Kind, g.FromRequest, g.Uses, a.ArgsSHA256)); err != nil {
		return false, err
	}
	if g.ItemID != 0 {
		note := fmt.Sprintf("Auto-approved %s (%s) under %s by %s.", r.ID, callName(a.Tool, a.Command), g.Name(), g.CreatedBy.Display)
		if g.Kind == approvals.GrantOnce {
			note += " It was a once grant, now used up."
		}
		if left != "" {
			note += " Budget: " + left + "."
		}
		if err := tx.Emit(g.ItemID, bot.EventNote, note); err != nil {
			return false, err
		}
	}
	return true, nil
}

// grantNote is what an approval that made a grant adds to its answer.
func grantNote(res bot.Result, g *approvals.Grant) bot.Result {
	if g == nil {
		return res
	}
	says := fmt.Sprintf("%s: %s calls of %s by %s in %s (%s) are approved at once until %s. Revoke it with revoke_grant {\"grant_id\": %d}.",
		g.Name(), g.Kind, callName(g.Tool, g.Command), g.AgentName, grantSpace(g), g.MatchText(), stamp(g.ExpiresAt), g.ID)
	res.Text += " You also made " + says
	res.Grants = []bot.GrantView{{ID: g.ID, Says: says}}
	if d, ok := res.Data.(map[string]any); ok {
		d["grant"] = grantData(g)
	}
	return res
}

// grantOptions are the grants an approver may add to an approval of r,
// for the surfaces' buttons: none unless the tool allows them and r could
// take one.
func (s *Service) grantOptions(r *approvals.Request) []bot.GrantOption {
	if r.Action == nil || r.Status != approvals.StatusPending || r.Quorum > 1 || r.StepUp > 0 || r.MinAssurance != "" || len(r.Stages) > 0 ||
		r.Action.Mechanics == string(policy.MechanicsDryRunConfirm) || r.Action.Category == string(policy.CategoryDestructive) {
		return nil
	}
	def := s.def(r.Action.Tool)
	var out []bot.GrantOption
	for _, k := range approvals.GrantKinds {
		if !def.allowsGrant(k) {
			continue
		}
		switch k {
		case approvals.GrantOnce:
			out = append(out, bot.GrantOption{Kind: string(k), Label: "Approve + next identical call"})
		case approvals.GrantSession:
			if r.Space.RunID != "" {
				out = append(out, bot.GrantOption{Kind: string(k), Label: "Approve for this session"})
			}
		case approvals.GrantDuration:
			d := min(time.Hour, def.spec.Grants.Max)
			out = append(out, bot.GrantOption{Kind: string(k), For: fmtDur(d), Label: "Approve for " + fmtDur(d)})
		}
	}
	return out
}

// fmtDur writes a duration as people write it: 1h, 30m, 8h, 1h30m.
func fmtDur(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	s = strings.TrimSuffix(s, "0m")
	if s == "" {
		return "0s"
	}
	return s
}

// grantSpace is where a grant applies: its space, and its run unless it is
// a duration grant (any run).
func grantSpace(g *approvals.Grant) string {
	sp := g.Space
	if g.Kind == approvals.GrantDuration {
		sp.RunID = ""
	}
	return sp.Label()
}

// grantData is a grant as structured fields.
func grantData(g *approvals.Grant) map[string]any {
	d := map[string]any{
		"grant_id":     g.ID,
		"name":         g.Name(),
		"tool":         g.Tool,
		"kind":         string(g.Kind),
		"agent":        g.Agent,
		"agent_name":   g.AgentName,
		"user_id":      g.Space.UserID,
		"agent_id":     g.Space.AgentID,
		"run_id":       g.Space.RunID,
		"created_by":   g.CreatedBy.Display,
		"from_request": g.FromRequest,
		"created_at":   stamp(g.CreatedAt),
		"expires_at":   stamp(g.ExpiresAt),
		"uses":         g.Uses,
		"revoked":      g.Revoked,
		"constraint":   g.MatchText(),
	}
	if g.Command != "" {
		d["command"] = g.Command
	}
	if g.ArgsSHA256 != "" {
		d["args_sha256"] = g.ArgsSHA256
	}
	if len(g.Match) > 0 {
		m := map[string]json.RawMessage{}
		for k, v := range g.Match {
			m[k] = json.RawMessage(v)
		}
		d["match"] = m
	}
	if g.ItemID != 0 {
		d["item_id"] = g.ItemID
	}
	if g.Revoked {
		d["revoked_by"] = g.RevokedBy.Display
		d["revoked_at"] = stamp(g.RevokedAt)
	}
	return d
}

// ListGrantsArgs are list_grants' arguments.
type ListGrantsArgs struct {
	All bool `json:"all,omitempty" jsonschema:"true to list expired, used and revoked grants too (default: live grants only)"`
}

// RevokeGrantArgs are revoke_grant's arguments.
type RevokeGrantArgs struct {
	GrantID uint64 `json:"grant_id" jsonschema:"the grant's number (grant #4 is 4)"`
	Reason  string `json:"reason,omitempty" jsonschema:"why; recorded in the audit log"`
}

// Validate checks the number and the reason.
func (a *RevokeGrantArgs) Validate() error {
	if a.GrantID == 0 {
		return bot.Invalid("grant_id", "required: the grant's number, as list_grants shows it (grant #4 is 4)")
	}
	return bot.CheckText("reason", a.Reason, 1000, true)
}

// grantTools are list_grants and revoke_grant.
func (s *Service) grantTools() []bot.Tool {
	return []bot.Tool{
		{
			Name:        "list_grants",
			Description: "The standing grants in force (with all: true, also expired, used and revoked ones), newest first: what each approves, for which agent and space, who made it, until when. People see the grants of the spaces in their scope; an agent sees the grants that apply to it.",
			Capability:  policy.CapRead,
			Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
			Args:        ListGrantsArgs{},
			Handler:     s.listGrants,
		},
		{
			Name:        "revoke_grant",
			Description: "Revoke a standing grant at once: the next confirm_action it would have approved waits for a person again. People whose role holds approve and whose scope covers the grant's space revoke; agents never.",
			Capability:  policy.CapApprove,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        RevokeGrantArgs{},
			Handler:     s.revokeGrant,
		},
	}
}

// maxGrantsListed bounds one list_grants answer.
const maxGrantsListed = 200

// VisibleGrant reports whether caller may see g: an agent the grants that
// apply to it, anyone else the grants of spaces in its scope.
func VisibleGrant(caller *bot.Caller, g *approvals.Grant) bool {
	if caller == nil {
		return false
	}
	if caller.Kind != "person" || caller.Role == policy.RoleAgent {
		return g.Agent == caller.ID
	}
	return caller.InScope(g.Space.UserID)
}

func (s *Service) listGrants(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*ListGrantsArgs)
	var gs []approvals.Grant
	orphaned := map[uint64]bool{} // live, but the maker may no longer approve (grantFor ignores them)
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		gs, err = approvals.ListGrants(tx, maxGrantsListed, func(g *approvals.Grant) bool {
			return (args.All || g.Live(c.Now)) && VisibleGrant(c.Caller, g)
		})
		if err != nil {
			return err
		}
		for i := range gs {
			if !gs[i].Live(c.Now) {
				continue
			}
			ok, err := s.makerMayDecide(tx, &gs[i], s.grantDecidable(&gs[i]))
			if err != nil {
				return err
			}
			orphaned[gs[i].ID] = !ok
		}
		return nil
	})
	if err != nil {
		return bot.Result{}, err
	}
	list := make([]map[string]any, 0, len(gs))
	views := make([]bot.GrantView, 0, len(gs))
	var b strings.Builder
	what := "live standing grants"
	if args.All {
		what = "standing grants"
	}
	if len(gs) == 0 {
		b.WriteString("No " + what + " you may see.")
	} else {
		fmt.Fprintf(&b, "%s (%d):", strings.ToUpper(what[:1])+what[1:], len(gs))
	}
	for i := range gs {
		g := &gs[i]
		// The one rule (policy.SeesDetails): the agent the grant is for,
		// and people who may decide in its space, see the values it holds
		// fixed; for anyone else they are withheld.
		sensitive := s.def(g.Tool) != nil && s.def(g.Tool).spec.Sensitive
		if !policy.SeesDetails(c.Caller.Decider(), policy.Decidable{Ref: g.Name(), RequesterID: g.Agent, RequesterName: g.AgentName, SpaceUserID: g.Space.UserID}, sensitive) {
			withhold(g)
		}
		d := grantData(g)
		d["live"] = g.Live(c.Now)
		line := GrantLine(g, c.Now)
		if orphaned[g.ID] {
			d["inactive"] = "its maker may no longer approve this call (removed, revoked, demoted or rescoped): it approves nothing"
			line += "; inactive: its maker may no longer approve"
		}
		list = append(list, d)
		views = append(views, bot.GrantView{ID: g.ID, Says: line})
		b.WriteString("\n" + line)
	}
	return bot.Result{Text: b.String(), Data: map[string]any{"grants": list}, Grants: views}, nil
}

// GrantLine is one grant in one line for people.
func GrantLine(g *approvals.Grant, now time.Time) string {
	state := "until " + stamp(g.ExpiresAt)
	switch {
	case g.Revoked:
		state = "revoked by " + g.RevokedBy.Display + " at " + stamp(g.RevokedAt)
	case !g.Live(now) && g.Kind == approvals.GrantOnce && g.Uses > 0:
		state = "used"
	case !g.Live(now):
		state = "expired " + stamp(g.ExpiresAt)
	}
	return fmt.Sprintf("%s: %s of %s for %s in %s (%s) by %s, %s, used %d time(s)",
		g.Name(), g.Kind, callName(g.Tool, g.Command), g.AgentName, grantSpace(g), g.MatchText(), g.CreatedBy.Display, state, g.Uses)
}

func (s *Service) revokeGrant(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*RevokeGrantArgs)
	var (
		g       *approvals.Grant
		refusal *policy.Refusal
		already bool
	)
	err := c.Update(ctx, func(tx *bot.Tx) error {
		g, refusal, already = nil, nil, false
		got, err := approvals.LoadGrant(tx, args.GrantID)
		if err != nil {
			return err
		}
		if got == nil || !c.Caller.InScope(got.Space.UserID) {
			return bot.Errorf(bot.KindNotFound, "No grant #%d you may see. list_grants shows the grants in force.", args.GrantID)
		}
		g = got
		var approvers approvals.Approvers
		if def := s.def(g.Tool); def != nil {
			approvers = def.spec.Approvers
		}
		if refusal = c.Caller.MayDecide(policy.Decidable{Ref: g.Name(), SpaceUserID: g.Space.UserID, Approvers: approvers, ApproversOf: g.Tool + " requests and their grants"}); refusal != nil {
			return errRefused
		}
		if g.Revoked {
			already = true
			return nil
		}
		g.Revoked, g.RevokedBy, g.RevokedAt = true, principalParty(c.Caller), c.Now
		if err := approvals.PutGrant(tx, g); err != nil {
			return err
		}
		detail := fmt.Sprintf("%s (%s of %s for %s, made by %s on %s, used %d time(s)) revoked by %s", g.Name(), g.Kind, callName(g.Tool, g.Command), g.AgentName+" ["+g.Agent+"]", g.CreatedBy.Display, g.FromRequest, g.Uses, g.RevokedBy.Display)
		if args.Reason != "" {
			detail += ": " + args.Reason
		}
		if err := tx.Audit("grant_revoked", detail); err != nil {
			return err
		}
		if g.ItemID != 0 {
			return tx.Emit(g.ItemID, bot.EventNote, fmt.Sprintf("%s was revoked by %s; matching calls wait for a person again.", g.Name(), g.RevokedBy.Display))
		}
		return nil
	})
	if errors.Is(err, errRefused) {
		return bot.Result{}, c.Refuse(ctx, refusal)
	}
	if err != nil {
		return bot.Result{}, err
	}
	text := fmt.Sprintf("Revoked %s: the next matching call of %s waits for a person again.", g.Name(), g.Tool)
	if already {
		text = fmt.Sprintf("%s was already revoked by %s at %s.", g.Name(), g.RevokedBy.Display, stamp(g.RevokedAt))
	}
	return bot.Result{Text: text, Data: map[string]any{"grant": grantData(g)}}, nil
}

// grantRef names the grant that approved r in its receipt ("grant #4"), or
// "" when a person did.
func grantRef(r *approvals.Request) string {
	if r.GrantID == 0 {
		return ""
	}
	return "grant #" + fmt.Sprint(r.GrantID)
}

// principalParty is party(c) shown with the principal's id even when the
// person acted from chat: a grant outlives the click, and names the
// principal ("grant #4 by alice [prin_…]").
func principalParty(c *bot.Caller) approvals.Party {
	p := party(c)
	if c != nil {
		p.Display = fmt.Sprintf("%s [%s]", c.Name, c.ID)
	}
	return p
}

// makerMayDecide reports whether g's maker, as they stand now
// (bot.Chat.Current), may decide it under the one decision rule: a
// grant approves nothing once its maker has been removed, revoked,
// demoted, rescoped or taken off the tool's approvers.
func (s *Service) makerMayDecide(tx kv.Tx, g *approvals.Grant, it policy.Decidable) (bool, error) {
	maker, err := s.b.Chat().Current(tx, g.CreatedBy.ID)
	if err != nil || maker == nil {
		return false, err
	}
	return maker.MayDecide(it) == nil, nil
}

// grantDecidable is a request the grant would approve, as the decision
// rule sees it: the grant's agent as requester, its space, and the tool's
// approvers as configured now.
func (s *Service) grantDecidable(g *approvals.Grant) policy.Decidable {
	it := policy.Decidable{Ref: g.Name(), RequesterID: g.Agent, RequesterName: g.AgentName, SpaceUserID: g.Space.UserID}
	if def := s.def(g.Tool); def != nil {
		it.Approvers = def.spec.Approvers
	}
	return it
}

// PruneGrants is the "grants" sweep step: it drops expired grants from the
// match index (approvals.PruneGrantIndex), in bounded batches.
func (s *Service) PruneGrants(ctx context.Context, now time.Time) (int, error) {
	return bot.InBatches(ctx, s.b.Store(), func(tx kv.Tx) (int, bool, error) {
		return approvals.PruneGrantIndex(tx, now, bot.RetentionBatch)
	})
}

// auditBinding is a grant's binding for the audit chain: the hash, or the
// constrained argument names without their values (an argument may be
// sensitive; the values are in the grant, shown to those who may see them).
func auditBinding(g *approvals.Grant) string {
	if g.ArgsSHA256 != "" {
		return "args_sha256 " + g.ArgsSHA256
	}
	names := make([]string, 0, len(g.Match))
	for k := range g.Match {
		names = append(names, k)
	}
	slices.Sort(names)
	return "match on " + strings.Join(names, ", ")
}

// withhold hides the constrained values of a sensitive tool's grant from a
// caller who may not see the tool's details (auditBinding's form).
func withhold(g *approvals.Grant) {
	if len(g.Match) == 0 {
		return
	}
	names := map[string]string{}
	for k := range g.Match {
		names[k] = `"(withheld: sensitive)"` // a JSON string, as the values are
	}
	g.Match = names
}

// budgetErrors checks a grant budget.
func budgetErrors(b approvals.GrantBudget) []error {
	var errs []error
	if b.Uses < 0 || b.Per < 0 {
		errs = append(errs, errors.New("grants.budget.uses, grants.budget.per: must not be negative"))
	}
	if b.Per > 0 && b.Uses == 0 {
		errs = append(errs, errors.New("grants.budget.per: set uses too (at most uses calls per this window)"))
	}
	if b.SumArgument != "" && b.SumMax <= 0 {
		errs = append(errs, fmt.Errorf("grants.budget.sum.max: required with sum.argument %s: the most its calls add up to, above 0", b.SumArgument))
	}
	if b.SumArgument == "" && (b.SumMax != 0 || b.SumPer != 0) {
		errs = append(errs, errors.New("grants.budget.sum.argument: name the numeric argument whose sum is bounded"))
	}
	if b.SumPer < 0 {
		errs = append(errs, errors.New("grants.budget.sum.per: must not be negative"))
	}
	if b.WithinArgument != "" && (b.WithinPercent < 0 || b.WithinPercent > 100) {
		errs = append(errs, errors.New("grants.budget.within.percent: between 0 and 100"))
	}
	if b.WithinArgument == "" && b.WithinPercent != 0 {
		errs = append(errs, errors.New("grants.budget.within.argument: name the numeric argument held within the range"))
	}
	return errs
}

// fmtNum renders a number briefly: 500, 12.5.
func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
