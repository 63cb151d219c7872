package discord

import (
	"context"
	"fmt"
	"strconv"

	"github.com/bwmarrin/discordgo"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// Standing grants on Discord: an approvable card whose tool allows grants
// gets a row of approve-with-grant buttons ("cs:grant:<item>:<i>", i the
// index into the item's offered grants, checked against the item when
// clicked); `/countersign grants` answers with a Revoke button per grant
// ("cs:revoke:<grant number>"). Both go through the decision layer.
const (
	actGrant  = "grant"  // approve with the item's i-th offered grant
	actRevoke = "revoke" // revoke grant #id
	// maxRevokeButtons bounds the Revoke buttons of one answer (5 rows of
	// 5 buttons is Discord's limit).
	maxRevokeButtons = 25
)

// grantRow is the approve-with-grant row of a pending item, or nil.
func grantRow(it bot.Item) []discordgo.MessageComponent {
	if len(it.Grants) == 0 || it.Kind == bot.KindQuestion {
		return nil
	}
	var bs []discordgo.MessageComponent
	for i, g := range it.Grants[:min(len(it.Grants), 5)] {
		bs = append(bs, discordgo.Button{Label: buttonLabel(g.Label), Style: discordgo.SuccessButton, CustomID: customID(actGrant, it.ID, i)})
	}
	return []discordgo.MessageComponent{discordgo.ActionsRow{Components: bs}}
}

// onGrantComponent handles an approve-with-grant or a Revoke click; ok is
// false for any other component.
func (a *Adapter) onGrantComponent(ctx context.Context, i *discordgo.Interaction, customID string) (*discordgo.InteractionResponse, bool) {
	act, id, n, _, ok := parseCustomID(customID)
	if !ok || (act != actGrant && act != actRevoke) {
		return nil, false
	}
	verb := chat.Approve
	if act == actRevoke {
		verb = "revoke grant"
	}
	d, resp := a.decision(ctx, i, verb, id)
	if resp != nil {
		return resp, true
	}
	if act == actRevoke {
		d.ItemID, d.Verb = 0, ""
		return private(clip(chat.RevokeGrant(ctx, a.bot, d, id), 1500, block)), true
	}
	it, err := a.bot.Items().Get(ctx, id)
	if err != nil || n < 0 || n >= len(it.Grants) {
		return private(fmt.Sprintf("This grant is no longer offered on #%d; nothing was recorded. Approve it with the buttons it shows now.", id)), true
	}
	g := it.Grants[n]
	d.Grant = &bot.GrantChoice{Kind: g.Kind, For: g.For}
	out := chat.Decide(ctx, a.bot, d)
	if out.Status == chat.Decided && out.Reply != "" && i.Message != nil && out.Item.ID != 0 {
		// The card is updated from the outbox too; the grant is said privately.
		return private(clip(out.Reply, 1500, block)), true
	}
	return a.outcome(i, out), true
}

// grantsCommand answers `/countersign grants` with the list and a Revoke
// button per grant; nil for any other command.
func (a *Adapter) grantsCommand(ctx context.Context, caller *bot.Caller, userID, text string) *discordgo.InteractionResponse {
	if v := chat.Scope(text); v.Kind != chat.ScopeCommand || v.Command.Name != chat.CmdGrants {
		return nil
	}
	reply, ids := chat.ListGrants(ctx, a.bot, caller, Sink, userID)
	resp := private(clip(reply.Text, maxContent, block))
	var row []discordgo.MessageComponent
	for k, n := range ids[:min(len(ids), maxRevokeButtons)] {
		row = append(row, discordgo.Button{Label: "Revoke grant #" + strconv.FormatUint(n, 10), Style: discordgo.DangerButton, CustomID: "cs:" + actRevoke + ":" + strconv.FormatUint(n, 10)})
		if len(row) == 5 || k == min(len(ids), maxRevokeButtons)-1 {
			resp.Data.Components = append(resp.Data.Components, discordgo.ActionsRow{Components: row})
			row = nil
		}
	}
	return resp
}
