package actiontools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// requestApproval is request_approval: a consent request shown in chat. It
// does not time out: soft approval's wait does not auto-resolve.
func (s *Service) requestApproval(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*RequestApprovalArgs)
	question := strings.TrimSpace(args.Question)
	if question == "" {
		question = "Go ahead?"
	}
	id, err := approvals.NewRequestID(approvals.KindConsentRequest)
	if err != nil {
		return bot.Result{}, err
	}
	var req *approvals.Request
	err = c.Update(ctx, func(tx *bot.Tx) error {
		r := &approvals.Request{
			ID:        id,
			Kind:      approvals.KindConsentRequest,
			Space:     spaceRef(c.Space),
			Requester: party(c.Caller),
			Channel:   "default",
			CreatedAt: c.Now,
			Status:    approvals.StatusPending,
			Quorum:    1,
			Consent: &approvals.Consent{
				Action:    args.Action,
				Question:  question,
				Turn:      string(args.Turn),
				MessageID: string(args.MessageID),
			},
		}
		item, err := tx.NewItem(bot.KindConsent, r.ID, c.Space, r.Channel)
		if err != nil {
			return err
		}
		r.ItemID = item
		if err := approvals.PutRequest(tx, r, time.Time{}); err != nil {
			return err
		}
		req = r
		return tx.Audit("consent_requested", fmt.Sprintf("%s turn=%s message=%s", r.ID, orDash(r.Consent.Turn), orDash(r.Consent.MessageID)))
	})
	if err != nil {
		return bot.Result{}, err
	}
	return render(req), nil
}

// recordApproval is record_approval: a consent the agent reports the user
// gave in its own conversation. It is recorded and shown in chat, and it
// closes the con_ request it answers, if named. It is not a person's
// decision from an authenticated session, and nothing treats it as one.
func (s *Service) recordApproval(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*RecordApprovalArgs)
	me := party(c.Caller)
	id, err := approvals.NewRequestID(approvals.KindConsentRequest)
	if err != nil {
		return bot.Result{}, err
	}
	var req *approvals.Request
	refusal := ""
	err = c.Update(ctx, func(tx *bot.Tx) error {
		req, refusal = nil, ""
		detail := fmt.Sprintf("turn=%s message=%s", orDash(string(args.Turn)), orDash(string(args.MessageID)))
		if args.RequestID != "" {
			r, err := approvals.LoadRequest(tx, args.RequestID)
			if err != nil {
				return err
			}
			if r == nil || r.Consent == nil {
				return bot.Errorf(bot.KindNotFound, "No consent request %s. Consent requests come from request_approval (con_…).", args.RequestID)
			}
			if !r.Requester.Same(me) {
				refusal = fmt.Sprintf("Access denied: %s was requested by %s; only its requester records the consent it got in its own conversation.", r.ID, r.Requester.Display)
				return errRefused
			}
			if r.Status != approvals.StatusPending {
				return conflict(r)
			}
			r.Close(approvals.StatusRecorded, "the agent reports the user approved in its conversation", c.Now)
			r.Consent.Detail = args.Detail
			if args.Turn != "" {
				r.Consent.Turn = string(args.Turn)
			}
			if args.MessageID != "" {
				r.Consent.MessageID = string(args.MessageID)
			}
			if err := approvals.PutRequest(tx, r, time.Time{}); err != nil {
				return err
			}
			req = r
			if err := tx.Audit("consent_recorded", r.ID+" "+detail); err != nil {
				return err
			}
			return decided(tx, r)
		}
		r := &approvals.Request{
			ID:        id,
			Kind:      approvals.KindConsentRequest,
			Space:     spaceRef(c.Space),
			Requester: me,
			Channel:   "default",
			CreatedAt: c.Now,
			Status:    approvals.StatusPending,
			Quorum:    1,
			Consent: &approvals.Consent{
				Action:    args.Action,
				Detail:    args.Detail,
				Turn:      string(args.Turn),
				MessageID: string(args.MessageID),
			},
		}
		r.Close(approvals.StatusRecorded, "the agent reports the user approved in its conversation", c.Now)
		item, err := tx.NewItem(bot.KindConsent, r.ID, c.Space, r.Channel)
		if err != nil {
			return err
		}
		r.ItemID = item
		if err := approvals.PutRequest(tx, r, time.Time{}); err != nil {
			return err
		}
		req = r
		return tx.Audit("consent_recorded", r.ID+" "+detail)
	})
	if errors.Is(err, errRefused) {
		return bot.Result{}, c.Deny(ctx, refusal)
	}
	if err != nil {
		return bot.Result{}, err
	}
	s.waits.notify(req.ID)
	return render(req), nil
}

// setMode is set_approval_mode.
func (s *Service) setMode(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*ModeArgs)
	mode, err := policy.ParseApprovalMode(args.Mode)
	if err != nil {
		return bot.Result{}, bot.Invalid("mode", "%v", err)
	}
	sp := spaceRef(c.Space)
	var prev policy.ApprovalMode
	err = c.Update(ctx, func(tx *bot.Tx) error {
		p, err := s.mode(tx, sp)
		if err != nil {
			return err
		}
		prev = p
		if err := approvals.PutApprovalMode(tx, sp, string(mode)); err != nil {
			return err
		}
		return tx.Audit("approval_mode_set", fmt.Sprintf("%s -> %s (asked: %q)", prev, mode, args.Mode))
	})
	if err != nil {
		return bot.Result{}, err
	}
	return bot.Result{
		Text: fmt.Sprintf("Approval mode for %s is now %s (was %s), from the next call on.", spaceLabel(c.Space), mode, prev),
		Data: map[string]any{"mode": string(mode), "previous": string(prev), "prompt": policy.ApprovalPrompt(mode), "space": c.Space},
	}, nil
}

// getMode is get_approval_mode.
func (s *Service) getMode(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	sp := spaceRef(c.Space)
	var mode policy.ApprovalMode
	source := "default"
	err := c.View(ctx, func(tx kv.Tx) error {
		stored, err := approvals.LoadApprovalMode(tx, sp)
		if err != nil {
			return err
		}
		if stored != "" {
			source = "set"
		}
		mode, err = s.mode(tx, sp)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	prompt := policy.ApprovalPrompt(mode)
	text := fmt.Sprintf("Approval mode for %s: %s. It adds no prompt: the agent asks before nothing.", spaceLabel(c.Space), mode)
	if prompt != "" {
		text = fmt.Sprintf("Approval mode for %s: %s. Put this in the agent's system prompt:\n\n%s", spaceLabel(c.Space), mode, prompt)
	}
	return bot.Result{Text: text, Data: map[string]any{"mode": string(mode), "source": source, "prompt": prompt, "space": c.Space}}, nil
}

// mode is the effective mode of a space: the one set, else the default.
func (s *Service) mode(tx kv.Tx, sp approvals.SpaceRef) (policy.ApprovalMode, error) {
	stored, err := approvals.LoadApprovalMode(tx, sp)
	if err != nil || stored == "" {
		return s.o.DefaultApprovalMode, err
	}
	m, err := policy.ParseApprovalMode(stored)
	if err != nil {
		return s.o.DefaultApprovalMode, nil
	}
	return m, nil
}

// spaceLabel names a memory space for people: user u1, agent coder, run r7.
func spaceLabel(sp bot.Space) string {
	s := "user " + sp.UserID
	if sp.AgentID != "" {
		s += ", agent " + sp.AgentID
	}
	if sp.RunID != "" {
		s += ", run " + sp.RunID
	}
	return s
}
