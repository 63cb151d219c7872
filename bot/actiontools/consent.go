package actiontools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
			Space:     c.Space,
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
		item, err := tx.NewItem(bot.KindConsent, r.ID, c.Space, r.Channel, time.Time{})
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
	return s.render(c.Caller.Decider(), req), nil
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
		// The audit entry is the record of what the user consented to
		// (seed 002): the action and the detail, bounded and quoted, then
		// where the consent was given.
		detail := consentAuditDetail(args)
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
				return s.conflict(c.Caller.Decider(), r)
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
			Space:     c.Space,
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
		item, err := tx.NewClosedItem(bot.KindConsent, r.ID, c.Space, r.Channel)
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
	return s.render(c.Caller.Decider(), req), nil
}

// The bounds of record_approval's text in its audit entry, whose detail
// holds at most approvals.MaxDetail bytes in all; the request itself keeps
// the whole text.
const (
	auditActionMax = 100
	auditDetailMax = 300
)

// consentAuditDetail is the audit detail of record_approval: where the
// consent was given (turn, message), then the action and the detail,
// quoted (escaped: line breaks, quotes, invisible and bidi characters show
// as escapes) and cut on a rune boundary.
func consentAuditDetail(args *RecordApprovalArgs) string {
	d := fmt.Sprintf("turn=%s message=%s action=%s", orDash(string(args.Turn)), orDash(string(args.MessageID)), strconv.Quote(clipBytes(args.Action, auditActionMax)))
	if args.Detail != "" {
		d += " detail=" + strconv.Quote(clipBytes(args.Detail, auditDetailMax))
	}
	return d
}

// clipBytes cuts s to at most max bytes on a rune boundary, marking a cut
// with "…".
func clipBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// setMode is set_approval_mode.
func (s *Service) setMode(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*ModeArgs)
	mode, err := policy.ParseApprovalMode(args.Mode)
	if err != nil {
		return bot.Result{}, bot.Invalid("mode", "%v", err)
	}
	sp := c.Space
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
		Text: fmt.Sprintf("Approval mode for user %s is now %s (was %s), from the next call on.", c.Space.Label(), mode, prev),
		Data: map[string]any{"mode": string(mode), "previous": string(prev), "prompt": policy.ApprovalPrompt(mode), "space": c.Space},
	}, nil
}

// getMode is get_approval_mode.
func (s *Service) getMode(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	sp := c.Space
	var mode policy.ApprovalMode
	var source string
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		mode, source, err = s.modeOf(tx, sp)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	prompt := policy.ApprovalPrompt(mode)
	text := fmt.Sprintf("Approval mode for user %s: %s. It adds no prompt: the agent asks before nothing.", c.Space.Label(), mode)
	if prompt != "" {
		text = fmt.Sprintf("Approval mode for user %s: %s. Put this in the agent's system prompt:\n\n%s", c.Space.Label(), mode, prompt)
	}
	return bot.Result{Text: text, Data: map[string]any{"mode": string(mode), "source": source, "prompt": prompt, "space": c.Space}}, nil
}

// mode is the effective mode of a space (see modeOf).
func (s *Service) mode(tx kv.Tx, sp bot.Space) (policy.ApprovalMode, error) {
	m, _, err := s.modeOf(tx, sp)
	return m, err
}

// modeOf is the effective mode of a space and where it comes from: "set"
// (set_approval_mode, which overrides the configuration from the next call
// on), "configured for user_id" (soft_approval.spaces), else "default"
// (soft_approval.mode, normal when unset).
func (s *Service) modeOf(tx kv.Tx, sp bot.Space) (policy.ApprovalMode, string, error) {
	configured, source := s.o.DefaultApprovalMode, "default"
	if m, ok := s.o.SpaceApprovalModes[sp.UserID]; ok {
		configured, source = m, "configured for user_id"
	}
	if p, err := policy.ParseApprovalMode(string(configured)); err == nil {
		configured = p // a synonym in the config reads as its mode
	}
	stored, err := approvals.LoadApprovalMode(tx, sp)
	if err != nil || stored == "" {
		return configured, source, err
	}
	m, err := policy.ParseApprovalMode(stored)
	if err != nil {
		return configured, source, nil
	}
	return m, "set", nil
}
