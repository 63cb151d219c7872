package actiontools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
	"github.com/countersign/countersign/receipt"
)

// errRefused ends a transaction whose caller may not do what it asks
// (record a consent, make a grant); the refusal is then recorded by
// Call.Deny or Call.Refuse.
var errRefused = errors.New("refused")

// decided emits what a final outcome causes, in the deciding transaction:
// the chat update for every sink, and the callback when one was asked for.
func decided(tx *bot.Tx, r *approvals.Request) error {
	if r.ItemID == 0 {
		return nil
	}
	if err := tx.Emit(r.ItemID, bot.EventDecided, ""); err != nil {
		return err
	}
	if r.CallbackURL != "" {
		return tx.EmitTo(CallbackSink, r.ItemID, bot.EventDecided, "")
	}
	return nil
}

// auditName is the audit action of a request's final outcome, one per
// decision: action_approved, consent_denied, question_answered...
func auditName(r *approvals.Request) string {
	return string(r.Kind) + "_" + string(r.Status)
}

// decide is approve_action (approve) and deny_action. approve_action with
// arguments is an approval with changes (an edit): validated like a new
// request (checkEdit), then recorded by approvals.Request.Edit.
func (s *Service) decide(approve bool) bot.Handler {
	return func(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
		args := a.(*DecideArgs)
		editing := args.Arguments != nil
		if args.BreakGlass && !approve {
			return bot.Result{}, bot.Invalid("break_glass", "only approve_action takes break_glass: a denial is never held back")
		}
		if editing && !approve {
			return bot.Result{}, bot.Invalid("arguments", "only approve_action takes arguments (an approval with changes); a denial takes a reason, which reaches the agent")
		}
		var (
			req     *approvals.Request
			out     approvals.Outcome
			refusal *policy.Refusal
			edited  bool // this call changed the version up for approval
			grant   *approvals.Grant
			// restarted is what changed in the facts since an earlier
			// approval of this pending request: the count started again.
			restarted string
		)
		err := c.Update(ctx, func(tx *bot.Tx) error {
			req, out, refusal, edited, grant, restarted = nil, 0, nil, false, nil, ""
			r, err := approvals.LoadRequest(tx, args.RequestID)
			if err != nil {
				return err
			}
			if r == nil {
				return bot.Errorf(bot.KindNotFound, "No request %s. Request ids come from confirm_action (req_…) or request_approval (con_…).", args.RequestID)
			}
			if !policy.InScope(c.Caller.Role, c.Caller.Scopes, r.Space.UserID) {
				// Nothing of another space's request, not even its
				// recorded outcome.
				refusal = canDecide(c, r, approve)
				return tx.Refuse(refusal)
			}
			if r.Kind == approvals.KindQuestionRequest {
				return bot.Invalid("request_id", "%s is a question: answer it with answer_question. An answer is never an approval", r.ID)
			}
			if editing && r.Action == nil {
				return bot.Invalid("arguments", "%s is a consent request: it has no arguments to edit. Approve it without arguments, or deny it with a reason", r.ID)
			}
			if r.Kind == approvals.KindConsentRequest && r.Status == approvals.StatusRecorded {
				req, out = r, approvals.OutcomeConflict
				return nil
			}
			if r.Expired(c.Now) {
				// Past expires_at: the automatic policy's outcome stands,
				// recorded now if the sweeper has not yet done it.
				req, out = r, approvals.OutcomeConflict
				return expire(tx, r, c.Now)
			}
			if args.BreakGlass && approve {
				// The one rule's typed exception, and all that follows from it (breakglass.go).
				req = r
				out, refusal, err = s.breakGlass(tx, c, r, args, editing)
				return err
			}
			if refusal = canDecide(c, r, approve); refusal != nil {
				return tx.Refuse(refusal)
			}
			d, err := voter(c, r, approve, args.Grant != nil)
			if err != nil {
				return err
			}
			stepUp := r.Decidable().StepUp // the request's, or its open stage's, before this vote
			if approve {
				if err := s.stale(c.Caller.Decider(), r, args.ArgsSHA256, editing); err != nil {
					return err
				}
			}
			if approve {
				if _, err := voidSuspended(tx, r); err != nil {
					return err
				}
			}
			basis, why, err := s.basisOf(tx, c, r, approve, args.Seen)
			if err != nil {
				return err
			}
			if why != "" {
				// An approval of this round rests on facts that changed
				// since: it no longer counts, and this one is the first
				// of the new count.
				r.Reopen(why, c.Now, r.ExpiresAt)
				restarted = why
				if err := tx.Audit("action_reopened", fmt.Sprintf("%s: the facts an earlier approval rested on changed (%s); the count starts again", r.ID, why)); err != nil {
					return err
				}
				if err := tx.Emit(r.ItemID, bot.EventNote, fmt.Sprintf("The facts changed since an earlier approval of %s (%s): approvals count again from the next one.", r.ID, why)); err != nil {
					return err
				}
			}
			open := r.OpenStage() // the stage open before this vote
			if editing {
				canon, sum, err := s.checkEdit(r, args.Arguments)
				if err == nil {
					var why string
					if why, err = s.ruleOfEdit(tx, r, s.tools[r.Action.Tool], canon, c.Now); err == nil && why != "" {
						err = bot.Invalid("arguments", "%s", why)
					}
				}
				if err != nil {
					if r.Status == approvals.StatusPending {
						return err
					}
					req, out = r, approvals.OutcomeConflict // decided: the first decision stands
					return nil
				}
				_, before := r.Action.Version()
				out = r.EditOn(d, canon, sum, args.Reason, c.Now, basis)
				_, after := r.Action.Version()
				edited = before != after
			} else {
				out = r.DecideOn(d, approve, args.Reason, c.Now, basis)
			}
			req = r
			if out == approvals.OutcomeFull {
				return &bot.Error{Kind: bot.KindConflict, Data: s.requestData(c.Caller.Decider(), r),
					Msg: r.Full(d) + ", so nothing was recorded. Approve it as it stands, or deny it with a reason (a denial is always recorded) and let the agent ask again."}
			}
			if grant, err = s.grantOnDecision(tx, c, r, out, approve, args.Grant); err != nil {
				return err
			}
			switch out {
			case approvals.OutcomeCounted:
				if err := approvals.PutRequest(tx, r, r.DueAt); err != nil {
					return err
				}
				detail := fmt.Sprintf("%s approve by %s: %s", r.ID, d.Display, r.Tally())
				if edited {
					detail = fmt.Sprintf("%s approve with changes by %s: args_sha256=%s approved_args_sha256=%s (the count restarts on the edited arguments): %s",
						r.ID, d.Display, r.Action.ArgsSHA256, r.Action.ApprovedArgsSHA256, r.Tally())
				}
				if err := tx.Audit(string(r.Kind)+"_vote", detail+stepUpNote(c, stepUp, approve)); err != nil {
					return err
				}
				if err := tx.Emit(r.ItemID, bot.EventUpdated, r.Tally()); err != nil {
					return err
				}
				if len(r.Stages) > 0 {
					if r.OpenStage() != open {
						// The next stage opened: its channels get the card.
						if err := postStage(tx, r); err != nil {
							return err
						}
					}
					// The card's thread says which stage is open now, and who decides it.
					return tx.Emit(r.ItemID, bot.EventNote, stageNote(r, edited))
				}
				return nil
			case approvals.OutcomeDecided:
				if err := approvals.PutRequest(tx, r, time.Time{}); err != nil {
					return err
				}
				detail := fmt.Sprintf("%s by %s", r.ID, strings.Join(r.DecidedBy, ", ")) + stepUpNote(c, stepUp, approve)
				if a := r.Action; a != nil {
					detail += fmt.Sprintf(" %s args_sha256=%s", callName(a.Tool, a.Command), a.ArgsSHA256)
					if a.Edited {
						detail += fmt.Sprintf(" approved_args_sha256=%s edited_by=%s", a.ApprovedArgsSHA256, a.EditedBy)
					}
				}
				if r.Reason != "" {
					detail += ": " + r.Reason
				}
				if err := tx.Audit(auditName(r), detail); err != nil {
					return err
				}
				return decided(tx, r)
			}
			return nil
		})
		if err != nil {
			return bot.Result{}, err
		}
		if refusal != nil {
			return bot.Result{}, bot.Refused(refusal)
		}
		switch out {
		case approvals.OutcomeDecided:
			c.AfterCommit(func() { s.waits.notify(req.ID) })
		case approvals.OutcomeConflict:
			c.AfterCommit(func() { s.waits.notify(req.ID) }) // it may have just expired
			return bot.Result{}, s.conflict(c.Caller.Decider(), req)
		case approvals.OutcomeRepeat:
			res := s.render(c.Caller.Decider(), req)
			if req.Status == approvals.StatusPending {
				res.Text = fmt.Sprintf("Your approval of %s is already counted: %s. Each approver counts once.", req.ID, req.Tally())
			} else {
				res.Text = "Already decided, as you decided it: " + res.Text
			}
			return res, nil
		case approvals.OutcomeCounted:
			res := s.render(c.Caller.Decider(), req)
			res.Text = fmt.Sprintf("Counted: %s on %s. It stays pending until the quorum is reached.", req.Tally(), req.ID)
			if restarted != "" {
				res.Text = fmt.Sprintf("Counted: %s on %s. The facts changed since the earlier approvals (%s), so they no longer count: it stays pending until the quorum approves on the facts as they are now.", req.Tally(), req.ID, restarted)
			}
			if len(req.Stages) > 0 {
				res.Text = fmt.Sprintf("Counted: %s on %s. %s", req.Tally(), req.ID, stageNote(req, edited))
			} else if edited {
				res.Text = fmt.Sprintf("Counted your approval with changes (%s): %s on %s. Approvals of the earlier arguments no longer count: each approver approves the same bytes, so it stays pending until the quorum approves the edited arguments (approved_args_sha256 %s).",
					changesText(req.Action), req.Tally(), req.ID, req.Action.ApprovedArgsSHA256)
			}
			return res, nil
		}
		return grantNote(s.render(c.Caller.Decider(), req), grant), nil
	}
}

// basisOf is what a vote on request r is cast on, read in its
// transaction: what the decider was shown, and, for an approval of an
// action with context, the facts as they stand. It refuses an approval
// cast on a card cut to fit when the call cannot be undone, and one cast
// on other facts than stand now (seen.facts). why, when not "", is what
// changed since the facts an earlier approval of this pending request
// rests on: the caller starts the count again.
func (s *Service) basisOf(tx *bot.Tx, c *bot.Call, r *approvals.Request, approve bool, seen *SeenArgs) (approvals.Basis, string, error) {
	basis := approvals.Basis{Seen: seen.seen(), Assurance: c.Caller.Assurance(r.StepUp, c.Now)}
	if r.Action == nil || r.Status != approvals.StatusPending || !approve {
		return basis, "", nil
	}
	if seen != nil && seen.Truncated && dangerous(r.Action) {
		return basis, "", bot.Invalid("seen", "the %s card you approved from was cut to fit, and %s cannot be undone: nothing was recorded. Approve it where it is shown whole (the web console), after reading all of it", seen.Surface, callName(r.Action.Tool, r.Action.Command))
	}
	if len(r.Context) == 0 {
		return basis, "", nil
	}
	facts, _, err := contextFacts(tx, r.Space, r.Context, c.Now)
	if err != nil {
		return basis, "", err
	}
	if seen != nil && seen.Facts != "" && seen.Facts != digestOf(facts) {
		return basis, "", &bot.Error{Kind: bot.KindConflict, Field: "seen.facts", Data: requestData(r, seesDetails(c.Caller.Decider(), r)),
			Msg: fmt.Sprintf("The facts %s rests on changed after they were shown to you (now: %s). Nothing was recorded: look at them again, and approve if you still agree.", r.ID, factsLine(facts))}
	}
	basis.Facts = facts
	return basis, approvals.JoinChanges(r.Changes(facts)), nil
}

// dangerous reports whether an action cannot be undone: destructive, or
// dry-run-first.
func dangerous(a *approvals.Action) bool {
	return a.Category == string(policy.CategoryDestructive) || a.Mechanics == string(policy.MechanicsDryRunConfirm)
}

// digestOf is bot.FactsDigest of recorded facts.
func digestOf(fs []approvals.Fact) string {
	subjects, versions := make([]string, len(fs)), make([]string, len(fs))
	for i, f := range fs {
		subjects[i], versions[i] = f.Subject, f.Version
	}
	return bot.FactsDigest(subjects, versions)
}

// factsLine is facts on one line: "allergy: penicillin; active_medication: none".
func factsLine(fs []approvals.Fact) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.Subject + ": " + f.Value
	}
	return strings.Join(parts, "; ")
}

// stale refuses an approval of pending action request r cast on a version
// of its arguments (seen, their hash) that another approver's edit has
// replaced since: each approver approves the bytes they saw. "" checks
// nothing, except on a request edited since it was created: a plain
// approval of it must name the version it approves (an edit names its
// own bytes), so that no approval counts for arguments its approver never
// saw. viewer is who the refusal is for.
func (s *Service) stale(viewer policy.Decider, r *approvals.Request, seen string, editing bool) error {
	if r.Action == nil || r.Status != approvals.StatusPending {
		return nil
	}
	_, cur := r.Action.Version()
	if seen == "" {
		if editing || !r.Revised() {
			return nil
		}
		return &bot.Error{Kind: bot.KindConflict, Field: "args_sha256", Data: s.requestData(viewer, r),
			Msg: fmt.Sprintf("%s was edited after it was created, so an approval must name the version it approves: pass args_sha256, the hash of the arguments you reviewed (action_status gives it: edited_args_sha256 while edited, else args_sha256; it is %s now). In chat, use the Approve button on the card, or type `approve <id> <version>` with the version `show <id>` gives. Nothing was recorded.", r.ID, cur)}
	}
	if cur == seen {
		return nil
	}
	if !slices.ContainsFunc(r.Votes, func(v approvals.Vote) bool { return v.Edit }) {
		return &bot.Error{Kind: bot.KindConflict, Field: "args_sha256", Data: s.requestData(viewer, r),
			Msg: fmt.Sprintf("args_sha256 %s is not the hash of %s's arguments (%s), and nobody has edited them: copy args_sha256 from action_status. Nothing was recorded.", seen, r.ID, cur)}
	}
	what := "another approver changed the arguments back to the proposal"
	if r.Action.Edited {
		changes := changesText(r.Action)
		if !seesDetails(viewer, r) {
			changes = "changes withheld: sensitive"
		}
		what = fmt.Sprintf("%s approved it with changes (%s)", r.Action.EditedBy, changes)
	}
	return &bot.Error{
		Kind: bot.KindConflict,
		Msg: fmt.Sprintf("%s changed since you reviewed it: %s, so the arguments up for approval now hash to %s, not %s. Nothing was recorded: review what is proposed now, and approve that if you agree.",
			r.ID, what, cur, seen),
		Data: s.requestData(viewer, r),
	}
}

// checkEdit validates an approver's edit of action request r exactly like
// a new request of the same tool (checkCall: canonical form, required
// arguments, the exec allowlist, the JSON Schema), and refuses an edit
// that would escape what was asked: another category or mechanics, another
// allowlist entry, or a destructive call whose dry-run plan would no longer
// describe what runs. It returns the canonical arguments and their hash.
// The tool and the space are the request's: an edit cannot name others.
func (s *Service) checkEdit(r *approvals.Request, edit Object) (json.RawMessage, string, error) {
	a := r.Action
	if a.Mechanics == string(policy.MechanicsDryRunConfirm) {
		return nil, "", bot.Invalid("arguments", "%s is destructive: its dry-run plan describes the proposed arguments, so it is approved as proposed or denied. To change it, deny it saying what to change; the agent asks again with a new plan", callName(a.Tool, a.Command))
	}
	ck, err := s.checkCall(a.Tool, edit)
	if err != nil {
		return nil, "", err
	}
	if ck.def != nil && ck.mech != "" {
		ck.cat = ck.def.categoryUnder(r.Rule, ck.cat)
		ck.mech = policy.MechanicsFor(ck.cat)
	}
	switch {
	case len(ck.missing) > 0:
		return nil, "", bot.Invalid("arguments."+ck.missing[0], "required by %s: an edit is the whole arguments object, so keep every required argument (%s)", a.Tool, strings.Join(ck.missing, ", "))
	case ck.refusal != "":
		return nil, "", bot.Invalid("arguments.command", "%s", ck.refusal)
	case string(ck.cat) != a.Category || string(ck.mech) != a.Mechanics:
		return nil, "", bot.Invalid("arguments", "the edit makes this a %s call (mechanics %s), but %s was asked as %s (mechanics %s): an edit cannot change a call's category. Approve it as proposed, or deny it and let the agent ask again", ck.cat, ck.mech, r.ID, a.Category, a.Mechanics)
	case ck.command != a.Command:
		return nil, "", bot.Invalid("arguments.command", "the edited command matches the allowlist entry %q, but %s was asked for %q: an edit keeps the command it was asked for; deny it and let the agent ask for the other command", ck.command, r.ID, a.Command)
	}
	return ck.canon, receipt.HashCanonical(a.Tool, ck.canon), nil
}

// changesText is the field-level difference of an edited action's
// arguments from the proposal ("dose 5mg → 2.5mg"), "" when unedited.
func changesText(a *approvals.Action) string {
	return actionChanges(a).Text()
}

// actionChanges is an edited action's Changes for the item view, nil when
// unedited.
func actionChanges(a *approvals.Action) *bot.Changes {
	if a == nil || !a.Edited {
		return nil
	}
	diff, more := bot.DiffArgs(a.Arguments, a.ApprovedArguments)
	return &bot.Changes{By: a.EditedBy, Diff: diff, More: more, ProposedSHA256: a.ArgsSHA256, ApprovedSHA256: a.ApprovedArgsSHA256}
}

// conflict is the answer to a decision on a request that already has its
// outcome: the first decision stands, and the recorded one is returned, as
// viewer may see it.
func (s *Service) conflict(viewer policy.Decider, r *approvals.Request) error {
	who := strings.Join(r.DecidedBy, ", ")
	var what string
	switch r.Status {
	case approvals.StatusApproved:
		what = "approved by " + who
		if who == "" {
			what = "approved automatically (read-only)"
		}
	case approvals.StatusDenied:
		what = "denied by " + who
		if who == "" {
			what = "denied by automatic policy"
		}
	case approvals.StatusExpired:
		what = "expired unanswered (denied by automatic policy)"
	case approvals.StatusRecorded:
		what = "recorded as the agent reported it; it is not decided in chat"
	case approvals.StatusAnswered:
		what = "answered by " + who
	case approvals.StatusDeclined:
		what = "declined by " + who
	default:
		what = string(r.Status)
	}
	if r.Reason != "" && r.Status != approvals.StatusApproved {
		what += ": " + r.Reason
	}
	return &bot.Error{
		Kind: bot.KindConflict,
		Msg:  fmt.Sprintf("%s was already %s. One decision, once: the first decision stands and is not changed.", r.ID, what),
		Data: s.requestData(viewer, r),
	}
}

// answer is answer_question.
func (s *Service) answer(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*AnswerArgs)
	d := party(c.Caller)
	var (
		req     *approvals.Request
		out     approvals.Outcome
		refusal *policy.Refusal
	)
	err := c.Update(ctx, func(tx *bot.Tx) error {
		req, out, refusal = nil, 0, nil
		r, err := approvals.LoadRequest(tx, args.RequestID)
		if err != nil {
			return err
		}
		if r == nil {
			return bot.Errorf(bot.KindNotFound, "No question %s. Question ids come from ask_user (ask_…).", args.RequestID)
		}
		if !policy.InScope(c.Caller.Role, c.Caller.Scopes, r.Space.UserID) {
			refusal = canDecide(c, r, false)
			return tx.Refuse(refusal)
		}
		if r.Question == nil {
			return bot.Invalid("request_id", "%s is not a question; decide it with approve_action or deny_action", r.ID)
		}
		if r.Expired(c.Now) {
			req, out = r, approvals.OutcomeConflict
			return expire(tx, r, c.Now)
		}
		if refusal = canDecide(c, r, false); refusal != nil {
			return tx.Refuse(refusal)
		}
		answers, err := chosen(r.Question, args)
		if err != nil {
			return err
		}
		out = r.Answer(d, answers, args.Text, args.Decline, c.Now)
		req = r
		if out != approvals.OutcomeDecided {
			return nil
		}
		if err := approvals.PutRequest(tx, r, time.Time{}); err != nil {
			return err
		}
		detail := fmt.Sprintf("%s by %s", r.ID, d.Display)
		if len(answers) > 0 {
			detail += ": " + strings.Join(answers, ", ")
		}
		if err := tx.Audit(auditName(r), detail); err != nil {
			return err
		}
		return decided(tx, r)
	})
	if err != nil {
		return bot.Result{}, err
	}
	if refusal != nil {
		return bot.Result{}, bot.Refused(refusal)
	}
	switch out {
	case approvals.OutcomeDecided:
		c.AfterCommit(func() { s.waits.notify(req.ID) })
	case approvals.OutcomeConflict:
		c.AfterCommit(func() { s.waits.notify(req.ID) }) // it may have just expired
		return bot.Result{}, s.conflict(c.Caller.Decider(), req)
	}
	return s.render(c.Caller.Decider(), req), nil
}

// chosen validates the answers against the question's options and returns
// them as the options are written.
func chosen(q *approvals.Question, a *AnswerArgs) ([]string, error) {
	if a.Decline {
		if len(a.Answers) > 0 {
			return nil, bot.Invalid("answers", "decline takes no answers; say why in text")
		}
		return nil, nil
	}
	if len(q.Options) == 0 {
		if len(a.Answers) > 0 {
			return nil, bot.Invalid("answers", "this question has no options; answer in text")
		}
		if strings.TrimSpace(a.Text) == "" {
			return nil, bot.Invalid("text", "required: this question takes a free-text answer")
		}
		return nil, nil
	}
	var out []string
	for _, ans := range a.Answers {
		i := slices.IndexFunc(q.Options, func(o string) bool { return strings.EqualFold(strings.TrimSpace(o), strings.TrimSpace(ans)) })
		if i < 0 {
			return nil, bot.Invalid("answers", "%q is not one of the options: %s", ans, strings.Join(q.Options, ", "))
		}
		if !slices.Contains(out, q.Options[i]) {
			out = append(out, q.Options[i])
		}
	}
	switch {
	case len(out) == 0:
		return nil, bot.Invalid("answers", "choose one of: %s", strings.Join(q.Options, ", "))
	case len(out) > 1 && !q.Multi:
		return nil, bot.Invalid("answers", "this question takes one answer, not %d", len(out))
	}
	return out, nil
}

// stageNote says which stage of pending staged request r is open and who
// decides it; after an edit, that the sign-off restarted there.
func stageNote(r *approvals.Request, edited bool) string {
	i := r.OpenStage()
	if i >= len(r.Stages) {
		return ""
	}
	st := r.Stages[i]
	who := approversText(st.Approvers)
	if who == "" {
		who = "anyone who may approve"
	}
	note := fmt.Sprintf("The %s stage (%d of %d) is open: %s approves it", st.Name, i+1, len(r.Stages), who)
	if i > 0 {
		note += ", someone who approved no earlier stage"
	}
	if st.StepUp > 0 {
		note += ", after a fresh sign-in in the web console"
	}
	note += "."
	if edited {
		note = fmt.Sprintf("The arguments were edited (%s), so the sign-off starts again at the first stage: every stage approves the edited arguments. ", changesText(r.Action)) + note
	}
	return note
}
