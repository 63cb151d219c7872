package actiontools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// Bounds of pending_actions.
const (
	DefaultPendingLimit = 20
	MaxPendingLimit     = 100
)

// PendingArgs are pending_actions' arguments.
type PendingArgs struct {
	Limit  *int   `json:"limit,omitempty" jsonschema:"how many requests, soonest to expire first (default 20, at most 100)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"where to continue: the next_cursor of the previous page; omit for the first"`
}

// Validate checks the limit and the cursor.
func (a *PendingArgs) Validate() error {
	if a.Limit != nil && (*a.Limit < 1 || *a.Limit > MaxPendingLimit) {
		return bot.Invalid("limit", "must be between 1 and %d", MaxPendingLimit)
	}
	if _, err := a.after(); err != nil {
		return err
	}
	return nil
}

func (a *PendingArgs) after() (uint64, error) {
	if a.Cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(a.Cursor, 10, 64)
	if err != nil || n == 0 {
		return 0, bot.Invalid("cursor", "%q is not a cursor: pass the next_cursor of the previous page, or omit it for the first", bot.OneLine(a.Cursor, 40))
	}
	return n, nil
}

// PendingRequest is one request of pending_actions' data.requests.
type PendingRequest struct {
	RequestID   string    `json:"request_id"`
	ItemID      uint64    `json:"item_id"`
	Tool        string    `json:"tool"`
	Summary     string    `json:"summary"` // "" when withheld (sensitive)
	Withheld    bool      `json:"withheld,omitempty"`
	Space       bot.Space `json:"space"`
	Requester   string    `json:"requester"`
	Mechanics   string    `json:"mechanics"`
	Destructive bool      `json:"destructive"`
	Tally       string    `json:"tally,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	WebURL      string    `json:"web_url,omitempty"`
}

func (s *Service) pendingTool() bot.Tool {
	return bot.Tool{
		Name:        "pending_actions",
		Description: "List the action requests awaiting a decision in your scope, soonest to expire first, a page at a time (limit, and cursor: the next_cursor of the previous page). A sensitive request's summary is withheld unless you may decide it or made it.",
		Capability:  policy.CapRead,
		Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
		Args:        PendingArgs{},
		Handler:     s.pendingActions,
	}
}

// pendingActions reads one page of the caller's queue of action requests:
// the store is asked for exactly the spaces in the caller's scope
// (bot.Items.Queue), so nothing outside it is listed, counted or hinted at.
func (s *Service) pendingActions(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	a := args.(*PendingArgs)
	limit := DefaultPendingLimit
	if a.Limit != nil {
		limit = *a.Limit
	}
	after, _ := a.after()
	page, err := s.b.Items().Queue(ctx, c.Caller, bot.QueueQuery{Kind: bot.KindAction, After: after, Limit: limit})
	var be *bot.Error
	if errors.As(err, &be) && be.Kind == bot.KindInvalid {
		return bot.Result{}, bot.Invalid("cursor", "%s", strings.ReplaceAll(be.Msg, "continue after", "continue after (cursor)"))
	}
	if err != nil {
		return bot.Result{}, err
	}
	out := make([]PendingRequest, 0, len(page.Items))
	err = c.View(ctx, func(tx kv.Tx) error {
		for i, it := range page.Items {
			r, err := approvals.LoadRequest(tx, page.Records[i].Key)
			if err != nil {
				return err
			}
			if r == nil || r.Action == nil {
				continue
			}
			p := PendingRequest{
				RequestID: r.ID, ItemID: it.ID, Tool: callName(r.Action.Tool, r.Action.Command), Summary: it.Title,
				Space: it.Space, Requester: it.Requester, Mechanics: r.Action.Mechanics, Destructive: it.Danger != nil,
				Tally: it.Tally, CreatedAt: it.CreatedAt, ExpiresAt: it.ExpiresAt, WebURL: s.b.WebLinks().ItemURL(it.ID),
			}
			if !c.Caller.MaySeeDetails(it) {
				p.Summary, p.Withheld = "", true
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return bot.Result{}, err
	}
	next := ""
	if page.Next != 0 {
		next = strconv.FormatUint(page.Next, 10)
	}
	return bot.Result{
		Text: pendingText(out, next, after != 0, c.Now),
		Data: map[string]any{"requests": out, "count": len(out), "next_cursor": next},
	}, nil
}

// pendingText is the page as lines, in chat's list style.
func pendingText(rs []PendingRequest, next string, paged bool, now time.Time) string {
	var b strings.Builder
	switch {
	case len(rs) == 0 && paged:
		b.WriteString("No more action requests await a decision.")
	case len(rs) == 0:
		b.WriteString("No action request awaits a decision in your scope.")
	default:
		fmt.Fprintf(&b, "%d action request(s) awaiting a decision, soonest to expire first:", len(rs))
	}
	for _, r := range rs {
		title := bot.OneLine(r.Summary, 120)
		if r.Withheld {
			title = "(details withheld: sensitive)"
		}
		if r.Destructive {
			title = "⚠ cannot be undone: " + title
		}
		notes := []string{"space " + bot.OneLine(r.Space.UserID, 40), "by " + bot.NameOf(r.Requester)}
		if !r.ExpiresAt.IsZero() {
			if r.ExpiresAt.After(now) {
				notes = append(notes, "expires "+r.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
			} else {
				notes = append(notes, "expiry due")
			}
		}
		fmt.Fprintf(&b, "\n  %s #%d %s — %s (%s)", r.RequestID, r.ItemID, r.Tool, title, strings.Join(notes, "; "))
	}
	if next != "" {
		fmt.Fprintf(&b, "\nMore: pass cursor %q for the next page.", next)
	}
	return b.String()
}
