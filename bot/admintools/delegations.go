package admintools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// The delegation tools: a person lends their approvals for a window
// (bot.Delegations; what the delegate may then decide is the one decision
// rule's, policy/delegation.go), ends it, and lists what runs. The chat
// command `delegate` and the console's delegation page do the same; these
// are for a person's own API key and for an admin who ends one.

// delegationTools are the delegation tools, for RegisterWith.
func delegationTools() []bot.Tool {
	return []bot.Tool{
		{
			Name:        "delegate_approvals",
			Description: "Lend your approvals to another person until a time (at most 14 days): they decide in your name what you may decide and they may too, never wider than either of you, and your approval counts once. Only a person whose role holds approve lends or takes approvals. end_delegation ends it.",
			Capability:  policy.CapApprove,
			Args:        DelegateArgs{},
			Handler:     delegateApprovals,
		},
		{
			Name:        "end_delegation",
			Description: "End a delegation at once: your own (no from), one lent to you (from: the delegator), or, as an admin, anyone's.",
			Capability:  policy.CapApprove,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        EndDelegationArgs{},
			Handler:     endDelegation,
		},
		{
			Name:        "list_delegations",
			Description: "List the delegations running now: who lends their approvals to whom, until when.",
			Capability:  policy.CapRead,
			Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
			Args:        NoArgs{},
			Handler:     listDelegations,
		},
	}
}

// DelegateArgs are delegate_approvals' arguments.
type DelegateArgs struct {
	To    string `json:"to" jsonschema:"the person who decides for you (their principal name)"`
	Until string `json:"until,omitempty" jsonschema:"when it ends, RFC 3339 (2026-12-02T18:00:00Z); or give for"`
	For   string `json:"for,omitempty" jsonschema:"how long it runs from now (4h, 90m); or give until"`
}

// Validate checks the delegate's name and that exactly one of until and
// for is given, well formed.
func (a *DelegateArgs) Validate() error {
	if err := bot.ValidateDirectoryName(a.To); err != nil {
		return bot.Invalid("to", "%v", err)
	}
	switch {
	case (a.Until == "") == (a.For == ""):
		return bot.Invalid("until", "give until (RFC 3339, 2026-12-02T18:00:00Z) or for (4h), one of them")
	case a.Until != "":
		if _, err := time.Parse(time.RFC3339, a.Until); err != nil {
			return bot.Invalid("until", "%q is not an RFC 3339 time such as 2026-12-02T18:00:00Z", a.Until)
		}
	default:
		if d, err := time.ParseDuration(a.For); err != nil || d <= 0 {
			return bot.Invalid("for", "%q is not a length of time such as 4h or 90m", a.For)
		}
	}
	return nil
}

// EndDelegationArgs are end_delegation's arguments.
type EndDelegationArgs struct {
	From   string `json:"from,omitempty" jsonschema:"the delegator whose delegation ends; none: your own"`
	Reason string `json:"reason,omitempty" jsonschema:"why, for the audit log (at most 300 characters)"`
}

// Validate checks the name and the reason's length.
func (a *EndDelegationArgs) Validate() error {
	if a.From != "" {
		if err := bot.ValidateDirectoryName(a.From); err != nil {
			return bot.Invalid("from", "%v", err)
		}
	}
	if len([]rune(a.Reason)) > 300 {
		return bot.Invalid("reason", "keep it to 300 characters")
	}
	return nil
}

// DelegationView is a delegation as the tools show it.
type DelegationView struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Start string `json:"start"`
	Until string `json:"until"`
	By    string `json:"by"`
	Line  string `json:"line"`
}

func delegationView(d bot.Delegation) DelegationView {
	return DelegationView{From: d.From, To: d.To, Start: d.Start.UTC().Format(time.RFC3339), Until: d.Until.UTC().Format(time.RFC3339), By: d.By, Line: d.Line()}
}

func delegateApprovals(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	a := args.(*DelegateArgs)
	var until time.Time
	if a.Until != "" {
		until, _ = time.Parse(time.RFC3339, a.Until)
	} else {
		d, _ := time.ParseDuration(a.For)
		until = c.Now.Add(d)
	}
	d, err := c.Bot().Delegations().Set(ctx, c.Caller, a.To, until)
	if err != nil {
		return bot.Result{}, err
	}
	return bot.Result{Text: fmt.Sprintf("Delegated: %s. %s decides in your name where you both may; end_delegation ends it.", d.Line(), d.To),
		Data: map[string]any{"delegation": delegationView(d)}}, nil
}

func endDelegation(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	a := args.(*EndDelegationArgs)
	why := strings.TrimSpace(a.Reason)
	if why == "" {
		why = "ended by " + c.Caller.String()
	}
	d, err := c.Bot().Delegations().End(ctx, c.Caller, a.From, why)
	if err != nil {
		return bot.Result{}, err
	}
	if d == nil {
		return bot.Result{Text: "No delegation running there; nothing was changed.", Data: map[string]any{"ended": false}}, nil
	}
	return bot.Result{Text: fmt.Sprintf("Ended: %s no longer lends their approvals to %s.", d.From, d.To), Data: map[string]any{"ended": true, "delegation": delegationView(*d)}}, nil
}

func listDelegations(ctx context.Context, c *bot.Call, _ any) (bot.Result, error) {
	ds, err := c.Bot().Delegations().Running(ctx)
	if err != nil {
		return bot.Result{}, err
	}
	views := make([]DelegationView, 0, len(ds))
	lines := make([]string, 0, len(ds))
	for _, d := range ds {
		views = append(views, delegationView(d))
		lines = append(lines, d.Line())
	}
	text := "No delegation is running."
	if len(lines) > 0 {
		text = strings.Join(lines, "\n")
	}
	return bot.Result{Text: text, Data: map[string]any{"delegations": views}}, nil
}
