package admintools

import (
	"context"
	"fmt"
	"strings"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// The suspension tools: an admin's word on who may not approve
// (bot.Suspension). A chat account the platform deactivates or removes is
// suspended by its adapter; these tools list suspensions, lift one once
// the account is active again, and suspend a principal by hand (what a
// surface that cannot see departures needs: Discord's HTTP interactions
// mode).

// suspensionTools are the suspension tools, for RegisterWith.
func suspensionTools() []bot.Tool {
	return []bot.Tool{
		{
			Name:        "list_suspensions",
			Description: "List the principals suspended from approving: who, why (the chat account deactivated, removed or gone from the server, or an admin's reason), when, and by whom.",
			Capability:  policy.CapAdmin,
			Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
			Args:        NoArgs{},
			Handler:     listSuspensions,
		},
		{
			Name:        "suspend_principal",
			Description: "Suspend a principal from approving, on every surface and every replica at once: their clicks and approvals are refused, and their approvals of pending requests stop counting. lift_suspension ends it.",
			Capability:  policy.CapAdmin,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        SuspendPrincipalArgs{},
			Handler:     suspendPrincipal,
		},
		{
			Name:        "lift_suspension",
			Description: "Lift a principal's suspension from approving (after their chat account is active again): they may approve from then on. Approvals voided by the suspension stay void; they approve again.",
			Capability:  policy.CapAdmin,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        LiftSuspensionArgs{},
			Handler:     liftSuspension,
		},
	}
}

// SuspendPrincipalArgs are suspend_principal's arguments.
type SuspendPrincipalArgs struct {
	Name   string `json:"name" jsonschema:"the principal's name (principals[].name, or a stored principal's)"`
	Reason string `json:"reason" jsonschema:"why, recorded in the audit log and shown to them when they try to approve (at most 300 characters)"`
}

// Validate checks the name and the reason.
func (a *SuspendPrincipalArgs) Validate() error {
	if err := bot.ValidateName(a.Name); err != nil {
		return bot.Invalid("name", "%v", err)
	}
	if r := strings.TrimSpace(a.Reason); r == "" || len([]rune(r)) > 300 {
		return bot.Invalid("reason", "say why in 1 to 300 characters: it is recorded and shown to the principal")
	}
	return nil
}

// LiftSuspensionArgs are lift_suspension's arguments.
type LiftSuspensionArgs struct {
	Name   string `json:"name" jsonschema:"the suspended principal's name (list_suspensions shows them)"`
	Reason string `json:"reason,omitempty" jsonschema:"why it is lifted (for the audit log), for example: account reactivated"`
}

// Validate checks the name and the reason's length.
func (a *LiftSuspensionArgs) Validate() error {
	if err := bot.ValidateName(a.Name); err != nil {
		return bot.Invalid("name", "%v", err)
	}
	if len([]rune(a.Reason)) > 300 {
		return bot.Invalid("reason", "keep it to 300 characters")
	}
	return nil
}

// SuspensionView is a suspension as the tools show it.
type SuspensionView struct {
	Name    string `json:"name"`
	Surface string `json:"surface"`
	Account string `json:"account,omitempty"`
	Reason  string `json:"reason"`
	At      string `json:"at"`
	By      string `json:"by"`
}

func suspensionView(s bot.Suspension) SuspensionView {
	return SuspensionView{Name: s.Name, Surface: s.Surface, Account: s.Account, Reason: s.Reason, At: s.At.UTC().Format("2006-01-02T15:04:05Z"), By: s.By}
}

func listSuspensions(ctx context.Context, c *bot.Call, _ any) (bot.Result, error) {
	var ss []bot.Suspension
	if err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		ss, err = bot.ListSuspensions(tx)
		return err
	}); err != nil {
		return bot.Result{}, err
	}
	views := make([]SuspensionView, 0, len(ss))
	lines := make([]string, 0, len(ss))
	for _, s := range ss {
		views = append(views, suspensionView(s))
		lines = append(lines, fmt.Sprintf("⛔ %s  %s", oneLine(s.Name), oneLine(s.Why())))
	}
	text := "Nobody is suspended from approving."
	if len(lines) > 0 {
		text = strings.Join(lines, "\n")
	}
	return bot.Result{Text: text, Data: map[string]any{"suspensions": views}}, nil
}

func suspendPrincipal(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	a := args.(*SuspendPrincipalArgs)
	var recorded bool
	err := c.Update(ctx, func(tx *bot.Tx) error {
		var err error
		recorded, err = tx.Suspend(bot.Suspension{Name: a.Name, Surface: "admin", Reason: strings.TrimSpace(a.Reason), At: c.Now, By: c.Caller.String()})
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	data := map[string]any{"name": a.Name, "suspended": true, "recorded": recorded}
	if !recorded {
		return bot.Result{Text: fmt.Sprintf("%s was already suspended from approving; nothing was changed (list_suspensions says why).", a.Name), Data: data}, nil
	}
	return bot.Result{Text: fmt.Sprintf("Suspended %s from approving, on every surface: their approvals of pending requests no longer count. lift_suspension ends it.", a.Name), Data: data}, nil
}

func liftSuspension(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	a := args.(*LiftSuspensionArgs)
	var lifted *bot.Suspension
	err := c.Update(ctx, func(tx *bot.Tx) error {
		var err error
		lifted, err = tx.LiftSuspension(a.Name, a.Reason)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	if lifted == nil {
		return bot.Result{Text: fmt.Sprintf("%s is not suspended; nothing was changed.", a.Name), Data: map[string]any{"name": a.Name, "lifted": false}}, nil
	}
	return bot.Result{Text: fmt.Sprintf("%s may approve again (was suspended: %s). Approvals the suspension voided stay void: they approve again where they still agree.", lifted.Name, oneLine(lifted.Why())),
		Data: map[string]any{"name": lifted.Name, "lifted": true, "was": suspensionView(*lifted)}}, nil
}
