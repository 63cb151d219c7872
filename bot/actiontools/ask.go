package actiontools

import (
	"context"
	"fmt"
	"strings"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
)

// ask is ask_user: a structured question posted to chat like a request.
// It expires unanswered after the default timeout; an answer is never an
// approval.
func (s *Service) ask(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*AskArgs)
	if args.CallbackURL != "" {
		if err := s.checkCallbackURL(ctx, c, args.CallbackURL); err != nil {
			return bot.Result{}, err
		}
	}
	id, err := approvals.NewRequestID(approvals.KindQuestionRequest)
	if err != nil {
		return bot.Result{}, err
	}
	var req *approvals.Request
	err = c.Update(ctx, func(tx *bot.Tx) error {
		r := &approvals.Request{
			ID:          id,
			Kind:        approvals.KindQuestionRequest,
			Space:       c.Space,
			Requester:   party(c.Caller),
			Channel:     "default",
			CreatedAt:   c.Now,
			ExpiresAt:   c.Now.Add(s.o.DefaultTimeout),
			Status:      approvals.StatusPending,
			Quorum:      1,
			CallbackURL: args.CallbackURL,
			Question: &approvals.Question{
				Question: args.Question,
				Options:  trimAll(args.Options),
				Multi:    args.Multi,
				Context:  args.Context,
			},
		}
		item, err := tx.NewItem(bot.KindQuestion, r.ID, c.Space, r.Channel, r.ExpiresAt)
		if err != nil {
			return err
		}
		r.ItemID = item
		if err := approvals.PutRequest(tx, r, r.ExpiresAt); err != nil {
			return err
		}
		req = r
		return tx.Audit("question_asked", fmt.Sprintf("%s %d options multi=%v", r.ID, len(r.Question.Options), r.Question.Multi))
	})
	if err != nil {
		return bot.Result{}, err
	}
	return s.render(c.Caller.Decider(), req), nil
}

func trimAll(ss []string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}
