package actiontools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
	"github.com/countersign/countersign/receipt"
)

// DefaultReceiptTTL is how long a receipt can be redeemed after the
// request was approved.
const DefaultReceiptTTL = time.Hour

// RedeemArgs are redeem_receipt's arguments.
type RedeemArgs struct {
	Receipt string `json:"receipt" jsonschema:"the receipt from action_status or the callback (payload.signature, base64url)"`
}

// Validate checks the receipt is present and plausibly sized.
func (a *RedeemArgs) Validate() error {
	a.Receipt = strings.TrimSpace(a.Receipt)
	if a.Receipt == "" {
		return bot.Invalid("receipt", "required: pass the receipt field of action_status for an approved request")
	}
	if len(a.Receipt) > 4096 {
		return bot.Invalid("receipt", "%d bytes is too long for a receipt (at most 4096)", len(a.Receipt))
	}
	return nil
}

// receiptFor is the signed receipt of an approved action request, or ""
// for any other request. It is deterministic (Ed25519 signatures are), so
// every reading of the request shows the same receipt.
func (s *Service) receiptFor(r *approvals.Request) string {
	if r.Action == nil || r.Status != approvals.StatusApproved || r.DecidedAt.IsZero() {
		return ""
	}
	issued := r.DecidedAt.UTC().Truncate(time.Second)
	by := r.ConfirmedBy
	if by == "" {
		// Approved at once by the configured category (mechanics auto).
		by = "auto (" + r.Action.Category + ")"
	}
	_, approved := r.Action.Version() // an approver's edit, else the proposal
	rec, err := s.b.SignReceipt(receipt.Payload{
		RequestID: r.ID, Tool: r.Action.Tool, ApprovedArgsSHA256: approved,
		ConfirmedBy: by, Grant: grantRef(r), IssuedAt: issued.Unix(), ExpiresAt: issued.Add(DefaultReceiptTTL).Unix(),
		Round: r.Round, Assurance: string(r.DecisionAssurance()), BreakGlass: r.BreakGlass != nil,
	})
	if err != nil {
		s.b.Logger().Error("signing a receipt", "request", r.ID, "err", err)
		return ""
	}
	return rec
}

// requestData is r's fields as viewer may see them (seesDetails), with
// the receipt of an approved action (a sensitive one's only for those who
// see its details).
func (s *Service) requestData(viewer policy.Decider, r *approvals.Request) map[string]any {
	details := seesDetails(viewer, r)
	d := requestData(r, details)
	if rec := s.receiptFor(r); rec != "" && details {
		d["receipt"] = rec
	}
	return d
}

// render is r as a tool result for viewer: every request tool answers
// with it, so each shows a sensitive request's details only to those the
// one rule lets see them.
func (s *Service) render(viewer policy.Decider, r *approvals.Request) bot.Result {
	return bot.Result{Text: describe(r, seesDetails(viewer, r)), Data: s.requestData(viewer, r)}
}

// executedDetail is the audit detail of action_executed: the hash of the
// arguments that run (the approved ones) and, for an edited approval, the
// proposal's too.
func executedDetail(r *approvals.Request) string {
	a := r.Action
	if !a.Edited {
		return fmt.Sprintf("%s %s args_sha256 %s confirmed by %s", r.ID, a.Tool, a.ArgsSHA256, r.ConfirmedBy)
	}
	return fmt.Sprintf("%s %s approved_args_sha256 %s (proposed args_sha256 %s, edited by %s) confirmed by %s", r.ID, a.Tool, a.ApprovedArgsSHA256, a.ArgsSHA256, a.EditedBy, r.ConfirmedBy)
}

// redeem is redeem_receipt: it verifies the receipt (this deployment's key,
// not expired, matching the stored approved request) and marks the request
// executed, once, in the transaction that audits action_executed.
func (s *Service) redeem(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*RedeemArgs)
	p, err := receipt.Verify(args.Receipt, s.b.PublicKey(), c.Now)
	switch {
	case errors.Is(err, receipt.ErrExpired):
		return bot.Result{}, bot.Invalid("receipt", "%v. Ask again with confirm_action: an expired receipt cannot be redeemed", err)
	case errors.Is(err, receipt.ErrSignature):
		return bot.Result{}, bot.Invalid("receipt", "%v. A receipt is redeemed only on the deployment that issued it, exactly as issued", err)
	case err != nil:
		return bot.Result{}, bot.Invalid("receipt", "%v", err)
	}
	var (
		req      *approvals.Request
		reopened string // what changed in the facts: the request went back to pending
	)
	err = c.Update(ctx, func(tx *bot.Tx) error {
		req, reopened = nil, ""
		r, err := approvals.LoadRequest(tx, p.RequestID)
		if err != nil {
			return err
		}
		if r == nil || r.Action == nil {
			return bot.Errorf(bot.KindNotFound, "No action request %s (it may have been removed by retention).", p.RequestID)
		}
		if !policy.InScope(c.Caller.Role, c.Caller.Scopes, r.Space.UserID) || !r.Requester.Same(party(c.Caller)) {
			return &bot.Error{Kind: bot.KindDenied, Msg: fmt.Sprintf("Only the requester of %s redeems its receipt.", r.ID)}
		}
		if p.Round != r.Round {
			why := "it went back for a new decision"
			if r.Reopened != "" {
				why = "the facts it rested on changed (" + r.Reopened + ")"
			}
			return &bot.Error{Kind: bot.KindConflict, Field: "receipt", Data: s.requestData(c.Caller.Decider(), r),
				Msg: fmt.Sprintf("This receipt is of an earlier approval of %s, withdrawn when %s: it never redeems. %s is %s now; wait for its new decision (action_status) and redeem the receipt that comes with it.", r.ID, why, r.ID, r.Status)}
		}
		_, approved := r.Action.Version()
		if r.Status != approvals.StatusApproved || r.Action.Tool != p.Tool || approved != p.ApprovedArgsSHA256 {
			return bot.Invalid("receipt", "does not match request %s as stored (status %s, tool %s)", r.ID, r.Status, r.Action.Tool)
		}
		if !r.ExecutedAt.IsZero() {
			return &bot.Error{Kind: bot.KindConflict, Data: s.requestData(c.Caller.Decider(), r),
				Msg: fmt.Sprintf("The receipt of %s was already redeemed at %s by %s. A receipt runs its action once: ask again with confirm_action to run it again.", r.ID, stamp(r.ExecutedAt), r.ExecutedBy)}
		}
		if why, err := s.reopenOnChangedFacts(tx, c, r); err != nil || why != "" {
			req, reopened = r, why
			return err
		}
		r.ExecutedAt, r.ExecutedBy = c.Now, c.Caller.String()
		if err := approvals.PutRequest(tx, r, r.DueAt); err != nil {
			return err
		}
		if _, err := tx.AuditAs(c.Caller.String(), r.Space, "action_executed",
			executedDetail(r)); err != nil {
			return err
		}
		req = r
		return nil
	})
	if err != nil {
		return bot.Result{}, err
	}
	if reopened != "" {
		s.waits.notify(req.ID)
		d := s.requestData(c.Caller.Decider(), req)
		d["facts_changed"] = reopened
		return bot.Result{}, &bot.Error{Kind: bot.KindConflict, Field: "receipt", Data: d,
			Msg: fmt.Sprintf("Not redeemed: the facts the approval of %s rested on changed since (%s). Do not run %s: the request is pending again, for a new decision on the facts as they are now; wait for it (action_status) and redeem the receipt of the new approval.", req.ID, reopened, req.Action.Tool)}
	}
	res := s.render(c.Caller.Decider(), req)
	res.Text = fmt.Sprintf("Redeemed: %s (%s) is recorded as executed at %s. Run it now with exactly the approved arguments.", req.ID, req.Action.Tool, stamp(req.ExecutedAt))
	return res, nil
}

// reopenOnChangedFacts compares the facts the approval of r rests on with
// the facts as they stand in tx. When any changed (superseded, retracted,
// flagged, or a new value), it sends r back for a new decision, in tx:
// pending again until now plus the tool's timeout, its item open again
// (a new one when a standing grant approved it without one) with the
// cards updated and a note in their threads, audited as action_reopened.
// It returns what changed ("allergy: none → penicillin"), "" when nothing
// did.
func (s *Service) reopenOnChangedFacts(tx *bot.Tx, c *bot.Call, r *approvals.Request) (string, error) {
	if len(r.Context) == 0 {
		return "", nil
	}
	facts, _, err := contextFacts(tx, r.Space, r.Context, c.Now)
	if err != nil {
		return "", err
	}
	why := approvals.JoinChanges(r.Changes(facts))
	if why == "" {
		return "", nil
	}
	timeout := s.o.DefaultTimeout
	if def := s.def(r.Action.Tool); def != nil {
		timeout = def.timeout
	}
	if !r.Reopen(why, c.Now, c.Now.Add(timeout)) {
		return "", nil
	}
	if r.ItemID == 0 {
		id, err := tx.NewItem(bot.KindAction, r.ID, r.Space, r.Channel, r.ExpiresAt)
		if err != nil {
			return "", err
		}
		r.ItemID = id
	} else if err := tx.ReopenItem(r.ItemID, r.ExpiresAt, factsChanged(r, why)); err != nil {
		return "", err
	}
	if err := approvals.PutRequest(tx, r, r.NextDue(s.o.RemindAfter, s.o.EscalateAfter)); err != nil {
		return "", err
	}
	if _, err := tx.AuditAs(c.Caller.String(), r.Space, "action_reopened",
		fmt.Sprintf("%s %s: receipt not redeemed, the facts its approval rested on changed (%s); pending again for a new decision", r.ID, r.Action.Tool, why)); err != nil {
		return "", err
	}
	return why, nil
}
