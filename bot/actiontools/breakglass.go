package actiontools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// This file is break-glass (break_glass: in config.yaml; docs/policy.md):
// a person approves their own request of a listed tool, alone, with a
// reason and a fresh step-up, through the one decision rule's typed
// exception (policy.BreakGlass); the approval is broadcast at once on
// every surface, marked in the receipt and the audit, and opens a review
// (approvals.Review) that break_glass.review's approvers countersign
// within its window, on every surface, as an item of kind
// bot.KindBreakGlassReview. The "break_glass" sweep step escalates an overdue
// review once; an overdue review blocks its breaker's next break-glass.

// Defaults of BreakGlassSpec.
const (
	DefaultReviewQuorum = 2
	DefaultReviewWithin = 24 * time.Hour
)

// BreakGlassSpec configures break-glass (break_glass: in config.yaml).
// The zero value allows none.
type BreakGlassSpec struct {
	// Tools are the tools whose requests their requester may approve
	// as break-glass.
	Tools []string
	// StepUp is how fresh the breaker's strong sign-in must be; 0 means
	// policy.DefaultFreshness.
	StepUp time.Duration
	// ReviewApprovers are who countersign a review (zero: anyone
	// holding approve), ReviewQuorum how many distinct reviewers
	// (0: DefaultReviewQuorum), ReviewWithin the window
	// (0: DefaultReviewWithin), ReviewChannel where the review's item
	// is posted ("": the tool's channel).
	ReviewApprovers policy.Approvers
	ReviewQuorum    int
	ReviewWithin    time.Duration
	ReviewChannel   string
}

// listed reports whether tool is listed under break_glass.tools.
func (b BreakGlassSpec) listed(tool string) bool {
	return slices.Contains(b.Tools, tool)
}

// ReviewArgs are the arguments of countersign_review and dispute_review.
type ReviewArgs struct {
	ReviewID string `json:"review_id" jsonschema:"the break-glass review (rev_…), as its item and the break-glass note name it"`
	Reason   string `json:"reason,omitempty" jsonschema:"your note; required to dispute"`
}

// Validate checks the arguments' shape.
func (a *ReviewArgs) Validate() error {
	if !strings.HasPrefix(a.ReviewID, "rev_") || len(a.ReviewID) > 64 {
		return bot.Invalid("review_id", "must be a review id, rev_… (the break-glass note and the review's item name it)")
	}
	if len(a.Reason) > policy.MaxBreakGlassReason {
		return bot.Invalid("reason", "is longer than %d characters; shorten it", policy.MaxBreakGlassReason)
	}
	return nil
}

// checkBreakGlass validates the spec against the declared tools.
func checkBreakGlass(bg BreakGlassSpec, tools map[string]*toolDef) error {
	var errs []error
	for i, name := range bg.Tools {
		if _, ok := tools[name]; !ok {
			errs = append(errs, fmt.Errorf("break_glass.tools[%d]: %q is not a tool declared under tools:; list only declared tools", i, name))
		}
	}
	if bg.ReviewQuorum < 0 {
		errs = append(errs, errors.New("break_glass.review.quorum: must be at least 1"))
	}
	if bg.ReviewWithin < 0 || bg.StepUp < 0 {
		errs = append(errs, errors.New("break_glass: review.within and step_up must be positive durations"))
	}
	if a := bg.ReviewApprovers; len(a.Roles) == 0 && len(a.Groups) == 0 && len(a.Principals) > 0 && len(a.Principals) < max(bg.ReviewQuorum, 1) {
		errs = append(errs, fmt.Errorf("break_glass.review: quorum %d cannot be reached by the %d principals named in approvers", bg.ReviewQuorum, len(a.Principals)))
	}
	return errors.Join(errs...)
}

// registerBreakGlass registers the review tools, the review item kind
// and the "break_glass" sweep step. With no break_glass.tools it still
// registers them (reviews opened under an earlier configuration stay
// countersignable).
func (s *Service) registerBreakGlass(b *bot.Bot) error {
	if err := checkBreakGlass(s.o.BreakGlass, s.tools); err != nil {
		return err
	}
	if err := b.Register(
		bot.Tool{
			Name:        "countersign_review",
			Description: "Countersign a break-glass review (rev_…): you reviewed a person's approval of their own request and agree it was warranted. The review is cleared once break_glass.review.quorum distinct reviewers countersign; the person who broke glass never countersigns their own.",
			Capability:  policy.CapApprove,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        ReviewArgs{},
			Handler:     s.review(true),
		},
		bot.Tool{
			Name:        "dispute_review",
			Description: "Dispute a break-glass review (rev_…) with a reason: it is recorded, posted with the review, and the review stays open (only countersignatures clear it).",
			Capability:  policy.CapApprove,
			Args:        ReviewArgs{},
			Handler:     s.review(false),
		},
	); err != nil {
		return err
	}
	b.Items().RegisterKind(bot.KindBreakGlassReview, reviewSource{s})
	b.OnSweep("break_glass", s.SweepReviews)
	return nil
}

// breakGlass is approve_action with break_glass: in tx, the one decision
// rule with its break-glass exception, then the request approved at once,
// its review opened, the audit, and the broadcast. It returns the outcome
// (OutcomeConflict for a request already decided), or the refusal
// (recorded), or an error that rolls everything back.
func (s *Service) breakGlass(tx *bot.Tx, c *bot.Call, r *approvals.Request, args *DecideArgs, editing bool) (approvals.Outcome, *policy.Refusal, error) {
	switch {
	case editing:
		return 0, nil, bot.Invalid("break_glass", "a break-glass approval approves the arguments as proposed; it takes no edit. Approve it as it stands, or deny it")
	case args.Grant != nil:
		return 0, nil, bot.Invalid("break_glass", "a break-glass approval makes no standing grant: it is for this one call")
	case r.Action == nil:
		return 0, nil, bot.Invalid("break_glass", "%s is not an action request; break-glass is for action requests of the tools under break_glass.tools", r.ID)
	}
	bg := s.o.BreakGlass
	d := party(c.Caller)
	if r.Status != approvals.StatusPending {
		if r.BreakGlass != nil && r.BreakGlass.By.Same(d) {
			return approvals.OutcomeRepeat, nil, nil // the same break-glass again: answered as recorded
		}
		return approvals.OutcomeConflict, nil, nil
	}
	overdue, err := approvals.OverdueReviewOf(tx, d.Name, c.Now)
	if err != nil {
		return 0, nil, err
	}
	it := r.Decidable()
	it.At = c.Now
	it.BreakGlass = &policy.BreakGlass{Listed: bg.listed(r.Action.Tool), Reason: strings.TrimSpace(args.Reason), RequesterKind: r.Requester.Kind, StepUp: bg.StepUp}
	if overdue != nil {
		it.BreakGlass.Overdue = fmt.Sprintf("%s, due %s", overdue.ID, overdue.Due.UTC().Format(time.RFC3339))
	}
	if refusal := c.Caller.MayDecide(it); refusal != nil {
		return 0, refusal, tx.Refuse(refusal)
	}
	if err := s.stale(c.Caller.Decider(), r, args.ArgsSHA256, false); err != nil {
		return 0, nil, err
	}
	basis, _, err := s.basisOf(tx, c, r, true, args.Seen)
	if err != nil {
		return 0, nil, err
	}
	stepUp := policy.BreakGlassStepUp(it.StepUp, bg.StepUp)
	basis.Assurance = c.Caller.Assurance(stepUp, c.Now)
	id, err := approvals.NewReviewID()
	if err != nil {
		return 0, nil, err
	}
	within := bg.ReviewWithin
	if within <= 0 {
		within = DefaultReviewWithin
	}
	rv := &approvals.Review{
		ID: id, RequestID: r.ID, Tool: r.Action.Tool, Space: r.Space, Breaker: d, Reason: it.BreakGlass.Reason,
		At: c.Now, Due: c.Now.Add(within),
		Approvers: bg.ReviewApprovers, Quorum: orDefault(bg.ReviewQuorum, DefaultReviewQuorum), Status: approvals.ReviewOpen,
	}
	channel := bg.ReviewChannel
	if channel == "" {
		channel = r.Channel
	}
	if rv.ItemID, err = tx.NewItem(bot.KindBreakGlassReview, rv.ID, r.Space, channel, time.Time{}); err != nil {
		return 0, nil, err
	}
	if err := approvals.PutReview(tx, rv); err != nil {
		return 0, nil, err
	}
	out := r.BreakGlassApprove(d, rv.Reason, c.Now, basis, rv.ID)
	if err := approvals.PutRequest(tx, r, time.Time{}); err != nil {
		return 0, nil, err
	}
	a := r.Action
	detail := fmt.Sprintf("%s by %s break_glass review=%s %s args_sha256=%s", r.ID, d.Display, rv.ID, callName(a.Tool, a.Command), a.ArgsSHA256) + stepUpNote(c, stepUp, true) + ": " + rv.Reason
	if err := tx.Audit(auditName(r), detail); err != nil {
		return 0, nil, err
	}
	if _, err := tx.AuditAs(c.Caller.String(), r.Space, "break_glass", fmt.Sprintf("%s approved their own %s request %s as break-glass: %s. Review %s (#%d) by %s, %d countersignatures, due %s",
		d.Display, a.Tool, r.ID, rv.Reason, rv.ID, rv.ItemID, reviewersText(rv.Approvers), rv.Need(), rv.Due.UTC().Format(time.RFC3339))); err != nil {
		return 0, nil, err
	}
	if r.ItemID != 0 {
		// On the request's card, on every surface: everyone it was
		// posted to for a decision hears at once that it was taken.
		if err := tx.Emit(r.ItemID, bot.EventNote, breakGlassNote(r, rv)); err != nil {
			return 0, nil, err
		}
	}
	return out, nil, decided(tx, r)
}

// breakGlassNote is the broadcast of a break-glass approval.
func breakGlassNote(r *approvals.Request, rv *approvals.Review) string {
	return fmt.Sprintf("BREAK-GLASS: %s approved their own %s request %s without another approver, after a fresh sign-in. Reason: %s. Review %s (item #%d) needs %d countersignatures from %s by %s.",
		bot.NameOf(rv.Breaker.Display), r.Action.Tool, r.ID, bot.OneLine(rv.Reason, 300), rv.ID, rv.ItemID, rv.Need(), reviewersText(rv.Approvers), rv.Due.UTC().Format("2006-01-02 15:04 UTC"))
}

// breakGlassLine is what a break-glass approval's card says of it.
func breakGlassLine(r *approvals.Request) string {
	b := r.BreakGlass
	return fmt.Sprintf("approved by %s alone, their own request: %s (review %s)", bot.NameOf(b.By.Display), b.Reason, b.Review)
}

// reviewersText names a review's approvers for people.
func reviewersText(a policy.Approvers) string {
	if w := approversText(a); w != "" {
		return w
	}
	return "anyone who may approve"
}

// breakGlassData is what action_status and the callback say of a
// break-glass approval; nil for any other request.
func breakGlassData(r *approvals.Request) map[string]any {
	if r.BreakGlass == nil {
		return nil
	}
	return map[string]any{"by": r.BreakGlass.By.Display, "reason": r.BreakGlass.Reason, "at": stamp(r.BreakGlass.At), "review_id": r.BreakGlass.Review}
}

// review is countersign_review (countersign) and dispute_review.
func (s *Service) review(countersign bool) bot.Handler {
	return func(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
		args := a.(*ReviewArgs)
		if !countersign && strings.TrimSpace(args.Reason) == "" {
			return bot.Result{}, bot.Invalid("reason", "required: say what is wrong with the break-glass, for the breaker and the other reviewers")
		}
		d := party(c.Caller)
		var (
			rv      *approvals.Review
			out     approvals.Outcome
			refusal *policy.Refusal
		)
		err := c.Update(ctx, func(tx *bot.Tx) error {
			rv, out, refusal = nil, 0, nil
			got, err := approvals.LoadReview(tx, args.ReviewID)
			if err != nil {
				return err
			}
			if got == nil || !c.Caller.InScope(got.Space.UserID) {
				return bot.Errorf(bot.KindNotFound, "No break-glass review %s. Review ids (rev_…) are in the break-glass note and on the review's item.", args.ReviewID)
			}
			rv = got
			if rv.Status != approvals.ReviewOpen {
				out = approvals.OutcomeConflict
				return nil
			}
			it := rv.Decidable()
			it.At = c.Now
			if refusal = c.Caller.MayDecide(it); refusal != nil {
				return tx.Refuse(refusal)
			}
			as := c.Caller.Assurance(0, c.Now)
			if countersign {
				out = rv.Countersign(d, strings.TrimSpace(args.Reason), c.Now, as)
			} else {
				out = rv.Dispute(d, strings.TrimSpace(args.Reason), c.Now, as)
			}
			switch out {
			case approvals.OutcomeRepeat, approvals.OutcomeConflict:
				return nil
			case approvals.OutcomeFull:
				return bot.Errorf(bot.KindConflict, "%s already holds as many notes as a review keeps; nothing was recorded", rv.ID)
			}
			if err := approvals.PutReview(tx, rv); err != nil {
				return err
			}
			audit := func(action, detail string) error {
				_, err := tx.AuditAs(c.Caller.String(), rv.Space, action, detail)
				return err
			}
			switch {
			case !countersign:
				if err := audit("break_glass_review_disputed", fmt.Sprintf("%s disputed by %s (break-glass of %s by %s): %s", rv.ID, d.Display, rv.RequestID, rv.Breaker.Display, args.Reason)); err != nil {
					return err
				}
				return tx.Emit(rv.ItemID, bot.EventNote, fmt.Sprintf("%s disputes this break-glass: %s. The review stays open until %d reviewers countersign it.", bot.NameOf(d.Display), bot.OneLine(args.Reason, 300), rv.Need()))
			case out == approvals.OutcomeDecided:
				if err := audit("break_glass_review_cleared", fmt.Sprintf("%s countersigned by %s (break-glass of %s by %s)", rv.ID, strings.Join(rv.Countersigners(), ", "), rv.RequestID, rv.Breaker.Display)); err != nil {
					return err
				}
				return tx.Emit(rv.ItemID, bot.EventDecided, "")
			default:
				if err := audit("break_glass_review_countersigned", fmt.Sprintf("%s countersigned by %s: %s", rv.ID, d.Display, rv.Tally())); err != nil {
					return err
				}
				return tx.Emit(rv.ItemID, bot.EventUpdated, rv.Tally())
			}
		})
		if err != nil {
			return bot.Result{}, err
		}
		if refusal != nil {
			return bot.Result{}, bot.Refused(refusal)
		}
		res := bot.Result{Data: reviewData(rv)}
		switch out {
		case approvals.OutcomeConflict:
			return bot.Result{}, &bot.Error{Kind: bot.KindConflict, Data: reviewData(rv),
				Msg: fmt.Sprintf("%s was already cleared by %s; nothing was recorded.", rv.ID, strings.Join(rv.Countersigners(), ", "))}
		case approvals.OutcomeRepeat:
			res.Text = fmt.Sprintf("Your countersignature of %s is already counted: %s.", rv.ID, rv.Tally())
		case approvals.OutcomeDecided:
			res.Text = fmt.Sprintf("Cleared: %s on %s. %s may break glass again.", rv.Tally(), rv.ID, bot.NameOf(rv.Breaker.Display))
		default:
			if countersign {
				res.Text = fmt.Sprintf("Counted: %s on %s. It stays open until %d reviewers countersign.", rv.Tally(), rv.ID, rv.Need())
			} else {
				res.Text = fmt.Sprintf("Your dispute of %s is recorded; it stays open (%s).", rv.ID, rv.Tally())
			}
		}
		return res, nil
	}
}

// reviewData is a review as the review tools answer it.
func reviewData(rv *approvals.Review) map[string]any {
	d := map[string]any{
		"review_id": rv.ID, "request_id": rv.RequestID, "tool": rv.Tool, "status": string(rv.Status),
		"breaker": rv.Breaker.Display, "reason": rv.Reason, "at": stamp(rv.At), "due": stamp(rv.Due),
		"quorum": rv.Need(), "countersigned_by": nonNil(rv.Countersigners()),
	}
	if rv.ItemID != 0 {
		d["item_id"] = rv.ItemID
	}
	if !rv.ClearedAt.IsZero() {
		d["cleared_at"] = stamp(rv.ClearedAt)
	}
	if !rv.EscalatedAt.IsZero() {
		d["escalated_at"] = stamp(rv.EscalatedAt)
	}
	return d
}

// SweepReviews is the "break_glass" sweep step, a function of now: each
// open review past its deadline is escalated once (the escalation target
// of the action sweep, in the review item's thread on every surface, and
// audited as the sweeper). It returns how many it escalated.
func (s *Service) SweepReviews(ctx context.Context, now time.Time) (int, error) {
	c := s.b.SystemCall(now)
	n := 0
	err := c.Update(ctx, func(tx *bot.Tx) error {
		n = 0
		var due []string
		if err := approvals.OpenReviews(tx, func(id string, at time.Time) error {
			if !now.Before(at) && len(due) < sweepBatch {
				due = append(due, id)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, id := range due {
			rv, err := approvals.LoadReview(tx, id)
			if err != nil {
				return err
			}
			if rv == nil || !rv.Overdue(now) || !rv.EscalatedAt.IsZero() {
				continue
			}
			rv.EscalatedAt = now
			if err := approvals.PutReview(tx, rv); err != nil {
				return err
			}
			note := s.escalationNote(now)
			if err := tx.Emit(rv.ItemID, bot.EventEscalated, note); err != nil {
				return err
			}
			msg := fmt.Sprintf("%s is overdue: the break-glass of %s by %s was due for review by %s (%s). %s may not break glass again until it is cleared.",
				rv.ID, rv.RequestID, rv.Breaker.Display, rv.Due.UTC().Format(time.RFC3339), rv.Tally(), bot.NameOf(rv.Breaker.Display))
			if err := tx.Emit(rv.ItemID, bot.EventNote, msg); err != nil {
				return err
			}
			if _, err := tx.AuditAs(sweeperName, rv.Space, "break_glass_review_overdue", msg+" Escalated "+orDash(note)); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// ReviewCounts are the break-glass reviews awaiting countersignatures,
// and how many of them are overdue, at a time (for /metrics).
type ReviewCounts struct{ Open, Overdue int }

// CountReviews reads the open reviews at now.
func CountReviews(ctx context.Context, b *bot.Bot, now time.Time) (ReviewCounts, error) {
	var rc ReviewCounts
	err := b.View(ctx, func(tx kv.Tx) error {
		rc = ReviewCounts{}
		return approvals.OpenReviews(tx, func(_ string, due time.Time) error {
			rc.Open++
			if !now.Before(due) {
				rc.Overdue++
			}
			return nil
		})
	})
	return rc, err
}

// reviewSource renders break-glass reviews on every surface and maps a
// decision on one to countersign_review (approve) or dispute_review
// (reject, with its reason).
type reviewSource struct{ s *Service }

var (
	_ bot.ItemSource  = reviewSource{}
	_ bot.ItemDecider = reviewSource{}
	_ bot.VoteVoider  = reviewSource{}
)

// VoidVotes makes the countersignatures of the principal named name on
// the open review behind rec stop counting: they were suspended from
// approving (bot.Tx.Suspend). A cleared review is not changed.
func (reviewSource) VoidVotes(tx kv.Tx, rec bot.ItemRecord, name, why string) (bool, string, error) {
	rv, err := approvals.LoadReview(tx, rec.Key)
	if err != nil || rv == nil || !rv.VoidVotes(name, why) {
		return false, "", err
	}
	return true, "", approvals.PutReview(tx, rv)
}

// View renders the review behind rec.
func (src reviewSource) View(tx kv.Tx, rec bot.ItemRecord) (bot.Item, error) {
	rv, err := approvals.LoadReview(tx, rec.Key)
	if err != nil {
		return bot.Item{}, err
	}
	if rv == nil {
		return bot.Item{}, fmt.Errorf("item %d: review %s is missing", rec.ID, rec.Key)
	}
	name := bot.NameOf(rv.Breaker.Display)
	it := bot.Item{
		Title:     fmt.Sprintf("Break-glass review: %s approved their own %s request", name, rv.Tool),
		Requester: rv.Breaker.Display,
		CreatedAt: rv.At,
		Status:    "pending",
		Tally:     rv.Tally(),
		Asked:     fmt.Sprintf("%s broke glass: they approved their own request alone. %d reviewers who are not %s countersign it by %s; while it is overdue, %s may not break glass again.", name, rv.Need(), name, rv.Due.UTC().Format("2006-01-02 15:04 UTC"), name),
		Effect:    fmt.Sprintf("Countersigning says you reviewed %s's break-glass of %s and agree it was warranted; rejecting records your dispute (with your reason), and the review stays open.", name, rv.RequestID),
		Fields: []bot.Field{
			{Label: "Reason given", Value: rv.Reason},
			{Label: "Request", Value: rv.RequestID + " (" + rv.Tool + ")"},
			{Label: "Broken at", Value: rv.At.UTC().Format(time.RFC3339)},
			{Label: "Review due", Value: rv.Due.UTC().Format(time.RFC3339)},
			{Label: "Reviewers", Value: reviewersText(rv.Approvers)},
			{Label: "Review", Value: rv.ID},
		},
	}
	for _, v := range rv.Votes {
		if !v.Approve {
			it.Fields = append(it.Fields, bot.Field{Label: "Disputed by " + v.By.Name, Value: v.Reason})
		}
	}
	if !rv.EscalatedAt.IsZero() {
		it.Fields = append(it.Fields, bot.Field{Label: "Overdue", Value: "escalated at " + rv.EscalatedAt.UTC().Format(time.RFC3339)})
	}
	if rv.Status == approvals.ReviewCleared {
		it.Status = string(approvals.StatusApproved)
		it.DecidedBy = rv.Countersigners()
		it.DecidedAt = rv.ClearedAt
		it.Effect = ""
	}
	return it, nil
}

// DecisionCall maps a decision to the review tools (bot.ItemSource).
func (reviewSource) DecisionCall(rec bot.ItemRecord, approve bool, reason string, _ []string) (string, map[string]any, error) {
	args := map[string]any{"review_id": rec.Key}
	if reason != "" {
		args["reason"] = reason
	}
	if approve {
		return "countersign_review", args, nil
	}
	return "dispute_review", args, nil
}

// DecisionArgs maps a typed decision to the review tools
// (bot.ItemDecider). A review takes no edit, grant or answers.
func (reviewSource) DecisionArgs(rec bot.ItemRecord, d bot.Decision) (string, any, error) {
	if d.Edit != nil || d.Grant != nil || len(d.Answers) > 0 || d.BreakGlass {
		return "", nil, bot.Errorf(bot.KindInvalid, "#%d is a break-glass review: countersign it, or reject it with a reason to dispute it.", rec.ID)
	}
	a := &ReviewArgs{ReviewID: rec.Key, Reason: d.Reason}
	if d.Approve {
		return "countersign_review", a, nil
	}
	return "dispute_review", a, nil
}

// breakGlassOffer is the step-up window a break-glass approval of pending
// request r needs (bot.Item.BreakGlass), or 0 when its tool is not listed
// or it was not asked for by a person.
func (s *Service) breakGlassOffer(r *approvals.Request) time.Duration {
	if r.Action == nil || r.Status != approvals.StatusPending || r.Requester.Kind != "person" || !s.o.BreakGlass.listed(r.Action.Tool) {
		return 0
	}
	return policy.BreakGlassStepUp(r.Decidable().StepUp, s.o.BreakGlass.StepUp)
}
