package actiontools

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// This file is policy that reads the request (issue 25): a tool's rules
// (tools[].rules), CEL conditions evaluated in order on each call, the
// first that matches setting the request's category, approvers, quorum,
// stages, step-up, timeout or channel; and ordered stages (tools[].stages
// or a rule's). Conditions choose who must decide; who may decide is
// still the one decision rule (policy.Decide), which sees the
// open stage's approvers (approvals.Request.Decidable).

// RuleSpec is one tools[].rules entry: a CEL condition (When) and the
// policy keys it sets for a call it matches. A zero key keeps the tool's.
type RuleSpec struct {
	When      string
	Category  string
	Approvers *approvals.Approvers
	Quorum    int
	Stages    []StageSpec
	// StepUp makes approving the request need a fresh sign-in
	// (StepUpSpec.Within).
	StepUp   bool
	Timeout  time.Duration
	Channels []string
}

// StageSpec is one stage of an ordered sign-off (policy.Stage): its name,
// who approves it, how many, and whether approving it needs a fresh
// sign-in.
type StageSpec struct {
	Name      string
	Approvers approvals.Approvers
	Quorum    int
	StepUp    bool
	// Channels are where the card is posted too when the stage opens.
	Channels []string
	// Notify are the configured people sent the card directly when the
	// stage opens.
	Notify []string
}

// MaxRules and MaxStages bound a tool's rules and a sign-off's stages.
const (
	MaxRules  = 32
	MaxStages = 8
)

// rule is a compiled RuleSpec.
type rule struct {
	spec     RuleSpec
	cond     *policy.Condition
	category policy.Category // "" keeps the tool's
}

// ruleMatch is what a tool's rules say about one call: the rule that
// matched (nil: none), its position, why, or the error it failed closed
// on.
type ruleMatch struct {
	rule  *rule
	index int // 0-based
	why   string
	err   error
}

// record is the match as the request keeps it.
func (m ruleMatch) record() *approvals.RuleMatch {
	if m.rule == nil {
		return nil
	}
	rm := &approvals.RuleMatch{Index: m.index + 1, When: m.rule.cond.String(), Why: m.why}
	if m.err != nil {
		rm.Error = m.err.Error()
	}
	return rm
}

// compileRules compiles a tool's rules against its schema and checks what
// they set. Each problem names the rule (rules[j]).
func compileRules(t ToolSpec) ([]*rule, []string, error) {
	var errs []error
	if len(t.Rules) > MaxRules {
		errs = append(errs, fmt.Errorf("rules: %d rules; at most %d", len(t.Rules), MaxRules))
	}
	var out []*rule
	var facts []string
	for j, rs := range t.Rules {
		key := fmt.Sprintf("rules[%d]", j)
		cond, err := policy.CompileCondition(rs.When, t.Schema)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.when: %w", key, err))
			continue
		}
		r := &rule{spec: rs, cond: cond}
		if strings.TrimSpace(rs.Category) != "" {
			c, err := policy.ParseCategory(rs.Category)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.category: %w", key, err))
			}
			r.category = c
		}
		if rs.Quorum < 0 {
			errs = append(errs, fmt.Errorf("%s.quorum: must be at least 1", key))
		}
		if rs.Timeout < 0 {
			errs = append(errs, fmt.Errorf("%s.timeout: must not be negative", key))
		}
		if rs.Approvers != nil {
			errs = append(errs, checkApprovers(key+".approvers", *rs.Approvers)...)
		}
		errs = append(errs, checkStages(key+".stages", rs.Stages)...)
		if len(rs.Stages) > 0 && rs.Quorum > 1 {
			errs = append(errs, fmt.Errorf("%s: set quorum on each stage, not beside stages", key))
		}
		for _, f := range cond.Facts() {
			if !slices.Contains(facts, f) {
				facts = append(facts, f)
			}
		}
		out = append(out, r)
	}
	return out, facts, errors.Join(errs...)
}

// checkApprovers checks the roles of an approvers list at key.
func checkApprovers(key string, a approvals.Approvers) []error {
	var errs []error
	for j, r := range a.Roles {
		role, err := policy.ParseRole(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.roles[%d]: %w", key, j, err))
		} else if !policy.Grants(role, policy.CapApprove) {
			errs = append(errs, fmt.Errorf("%s.roles[%d]: role %q cannot approve; only admin and member hold the approve capability", key, j, r))
		}
	}
	for j, g := range a.Groups {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, fmt.Errorf("%s.groups[%d]: empty; name a group declared under groups", key, j))
		}
	}
	return errs
}

// checkStages checks an ordered sign-off at key.
func checkStages(key string, stages []StageSpec) []error {
	var errs []error
	if len(stages) > MaxStages {
		errs = append(errs, fmt.Errorf("%s: %d stages; at most %d", key, len(stages), MaxStages))
	}
	names := map[string]bool{}
	for i, st := range stages {
		sk := fmt.Sprintf("%s[%d]", key, i)
		n := strings.TrimSpace(st.Name)
		switch {
		case n == "":
			errs = append(errs, fmt.Errorf("%s.name: required (it is shown on the card: prescriber, pharmacist)", sk))
		case names[strings.ToLower(n)]:
			errs = append(errs, fmt.Errorf("%s.name: %q is used twice", sk, st.Name))
		}
		names[strings.ToLower(n)] = true
		if st.Quorum < 0 {
			errs = append(errs, fmt.Errorf("%s.quorum: must be at least 1", sk))
		}
		errs = append(errs, checkApprovers(sk+".approvers", st.Approvers)...)
	}
	return errs
}

// match evaluates d's rules in order on in: the first that matches, or
// the first that fails at run time (it applies: fail closed).
func (d *toolDef) match(in policy.ConditionInput) ruleMatch {
	for i, r := range d.rules {
		ok, why, err := r.cond.Eval(in)
		if err != nil {
			return ruleMatch{rule: r, index: i, err: err}
		}
		if ok {
			return ruleMatch{rule: r, index: i, why: why}
		}
	}
	return ruleMatch{}
}

// conditionInput is what d's conditions read about a call with canonical
// arguments canon by requester in space sp, in tx at now: the facts they
// name, as they stand.
func conditionInput(tx kv.Tx, d *toolDef, tool string, canon json.RawMessage, requester approvals.Party, scopes []string, sp policy.Space, now time.Time) (policy.ConditionInput, error) {
	in := policy.ConditionInput{
		Tool:      tool,
		Requester: policy.ConditionRequester{Name: requester.Name, Role: requester.Role, Kind: requester.Kind, Scopes: scopes, Groups: requester.Groups},
		Space:     sp,
		Now:       now,
		Facts:     map[string][]string{},
	}
	if err := json.Unmarshal(canon, &in.Args); err != nil {
		return in, err
	}
	for name, subject := range d.ruleFacts {
		live, err := memory.Live(tx, sp, subject)
		if err != nil {
			return in, err
		}
		vals := []string{}
		for _, f := range live {
			if f.Status == memory.StatusActive {
				vals = append(vals, f.Value)
			}
		}
		in.Facts[name] = vals
	}
	return in, nil
}

// stagesOf compiles a sign-off for a request: each stage's step-up is
// the configured window.
func (s *Service) stagesOf(specs []StageSpec) []policy.Stage {
	out := make([]policy.Stage, len(specs))
	for i, st := range specs {
		out[i] = policy.Stage{Name: strings.TrimSpace(st.Name), Approvers: st.Approvers, Quorum: max(st.Quorum, 1), Channels: slices.Clone(st.Channels), Notify: slices.Clone(st.Notify)}
		if st.StepUp {
			out[i].StepUp = s.stepUp.within
		}
	}
	return out
}

// postStage queues, in tx, the posts of r's card in the channels of its
// open stage (tools[].stages[].channels) and to its people
// (tools[].stages[].notify, bot.EventDirect): called when a stage opens (the
// request is created, or the stage before it is complete). The delivery
// skips a channel that holds a card of the item already (bot.EventPost),
// so a stage opened again (an edit, a voided approval) posts nothing new.
func postStage(tx *bot.Tx, r *approvals.Request) error {
	if r.ItemID == 0 || r.Status != approvals.StatusPending || len(r.Stages) == 0 {
		return nil
	}
	i := r.OpenStage()
	if i >= len(r.Stages) {
		return nil
	}
	for _, ch := range r.Stages[i].Channels {
		if ch == "" || ch == r.Channel {
			continue // the request's own channel has its first card
		}
		if err := tx.Emit(r.ItemID, bot.EventPost, ch); err != nil {
			return err
		}
	}
	for _, name := range r.Stages[i].Notify {
		if err := tx.Emit(r.ItemID, bot.EventDirect, name); err != nil {
			return err
		}
	}
	return nil
}

// applyRule sets what the matched rule says on new request r, whose
// category the call's check found to be base (an exec call's command's).
// A rule that failed at run time applies too, and its request needs a
// person at least (confirm).
func (s *Service) applyRule(r *approvals.Request, def *toolDef, m ruleMatch, base policy.Category) {
	if len(def.spec.Stages) > 0 {
		r.Stages = s.stagesOf(def.spec.Stages)
	}
	if m.rule != nil {
		rs := m.rule.spec
		r.Rule = m.record()
		if rs.Approvers != nil {
			r.Approvers = *rs.Approvers
		}
		if rs.Quorum > 0 {
			r.Quorum = rs.Quorum
		}
		if len(rs.Stages) > 0 {
			r.Stages = s.stagesOf(rs.Stages)
		}
		if rs.StepUp {
			r.StepUp = s.stepUp.within
		}
		if rs.Timeout > 0 {
			r.ExpiresAt = r.CreatedAt.Add(rs.Timeout)
		}
		if len(rs.Channels) > 0 && rs.Channels[0] != "" {
			r.Channel = rs.Channels[0]
		}
	}
	if len(r.Stages) > 0 {
		r.Quorum = 1 // each stage has its own
	}
	cat := def.categoryUnder(r.Rule, base)
	r.Action.Category = string(cat)
	r.Action.Mechanics = string(policy.MechanicsFor(cat))
}

// categoryUnder is the category of a call whose check found base, under
// the rule recorded as rm (nil: none): the rule's category when it sets
// one (never milder than an allowlisted command's), at least a
// confirmation when the rule failed at run time or the tool signs off in
// stages.
func (d *toolDef) categoryUnder(rm *approvals.RuleMatch, base policy.Category) policy.Category {
	cat := base
	staged := len(d.spec.Stages) > 0
	if rm != nil && rm.Index >= 1 && rm.Index <= len(d.rules) {
		rl := d.rules[rm.Index-1]
		if rl.category != "" {
			cat = rl.category
			if len(d.commands) > 0 && severity(base) > severity(cat) {
				cat = base // a rule never makes an allowlisted command milder
			}
		}
		staged = staged || len(rl.spec.Stages) > 0
		if rm.Error != "" && cat == policy.CategoryReadOnly {
			cat = policy.CategoryUnclassified
		}
	}
	if staged && cat == policy.CategoryReadOnly {
		cat = policy.CategoryUnclassified // a sign-off is asked of people
	}
	return cat
}

// severity orders categories like policy does: read-only, then mutating
// and unclassified, then destructive.
func severity(c policy.Category) int {
	switch c {
	case policy.CategoryReadOnly:
		return 0
	case policy.CategoryDestructive:
		return 2
	}
	return 1
}

// ruleOfEdit refuses an edit of request r whose arguments (canon) would
// make another rule apply than the one that set r's policy: the edited
// call must be asked again under its own rule.
func (s *Service) ruleOfEdit(tx kv.Tx, r *approvals.Request, def *toolDef, canon json.RawMessage, now time.Time) (string, error) {
	if def == nil || len(def.rules) == 0 {
		return "", nil
	}
	in, err := conditionInput(tx, def, r.Action.Tool, canon, r.Requester, r.Requester.Scopes, r.Space, now)
	if err != nil {
		return "", err
	}
	m := def.match(in)
	was, now2 := 0, 0
	if r.Rule != nil {
		was = r.Rule.Index
	}
	if m.rule != nil {
		now2 = m.index + 1
	}
	if was == now2 {
		return "", nil
	}
	which := func(i int) string {
		if i == 0 {
			return "no rule"
		}
		return fmt.Sprintf("rule %d (%s)", i, def.rules[i-1].cond)
	}
	return fmt.Sprintf("the edited arguments fall under %s, but %s was asked under %s: an edit cannot change which rule decides who must approve. Approve it as proposed, or deny it saying what to change, and let the agent ask again", which(now2), r.ID, which(was)), nil
}

// batchKey is what pending action request r may be approved together
// with (bot.Item.Batch): the same tool under the same rule; "" when it is
// never batched (destructive or dry-run-first, signed off in stages, a
// quorum above 1, step-up).
func batchKey(r *approvals.Request) string {
	a := r.Action
	if r.Status != approvals.StatusPending || a == nil || dangerous(a) || len(r.Stages) > 0 || r.Quorum > 1 || r.StepUp > 0 {
		return ""
	}
	if r.Rule == nil {
		return a.Tool + ", no rule"
	}
	return fmt.Sprintf("%s, rule %d", a.Tool, r.Rule.Index)
}
