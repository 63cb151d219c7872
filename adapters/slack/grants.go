package slack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	slackgo "github.com/slack-go/slack"
)

// Standing grants on Slack: an approvable card whose tool allows grants
// gets a second row of approve buttons, one per grant offered (their
// value is "12|session" or "12|duration|1h"); `/countersign grants`
// answers with a Revoke button per grant (value "4"). Both go through the
// decision layer: chat.Decide with Decision.Grant, chat.RevokeGrant.
const (
	actionApproveGrant = "countersign.approve_grant"
	actionRevokeGrant  = "countersign.revoke_grant"
	grantBlockPrefix   = "countersign-grants:"
	// maxRevokeButtons bounds the Revoke buttons of one answer (Slack
	// allows 25 elements per actions block; 5 blocks of 5 read better).
	maxRevokeButtons = 25
)

// grantBlocks is the row of approve-with-grant buttons of a pending item,
// or nothing when the item offers no grants.
func grantBlocks(it bot.Item) []slackgo.Block {
	if len(it.Grants) == 0 || it.Kind == bot.KindQuestion {
		return nil
	}
	id := strconv.FormatUint(it.ID, 10)
	var els []slackgo.BlockElement
	for _, g := range it.Grants {
		value := id + "|" + g.Kind
		if g.For != "" {
			value += "|" + g.For
		}
		b := slackgo.NewButtonBlockElement(actionApproveGrant, value, plain(plainText(g.Label, maxButtonText)))
		b.WithConfirm(slackgo.NewConfirmationBlockObject(
			plain(plainText(g.Label+" (#"+id+")?", maxConfirmTitle)),
			plain(plainText("You approve "+itemTitle(it)+" and make a standing grant: the agent's matching calls are approved at once under your name until it ends or is revoked (/countersign grants).", maxConfirmText)),
			plain("Approve"), plain("Cancel")))
		els = append(els, b)
	}
	return []slackgo.Block{slackgo.NewActionBlock(grantBlockPrefix+id, els...)}
}

// parseGrantValue reads an approve-with-grant button's value.
func parseGrantValue(v string) (uint64, *bot.GrantChoice, error) {
	parts := strings.Split(v, "|")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, nil, errors.New("not a grant button")
	}
	id, err := bot.ParseItemID(parts[0])
	if err != nil {
		return 0, nil, err
	}
	g := &bot.GrantChoice{Kind: parts[1]}
	if len(parts) == 3 {
		g.For = parts[2]
	}
	return id, g, nil
}

// handleGrantClick decides an approve-with-grant click, or revokes a grant.
func (a *Adapter) handleGrantClick(ctx context.Context, c click) {
	if c.action == actionRevokeGrant {
		n, err := strconv.ParseUint(c.value, 10, 64)
		if err != nil || n == 0 {
			a.tell(ctx, c.channel, c.user, "This button does not name a grant; nothing was revoked.")
			return
		}
		d := chat.Decision{Surface: bot.SurfaceSlack, UserID: c.who, Deliveries: c.deliveries}
		a.tell(ctx, c.channel, c.user, chat.RevokeGrant(ctx, a.bot, d, n))
		return
	}
	id, g, err := parseGrantValue(c.value)
	if err != nil {
		a.tell(ctx, c.channel, c.user, "This button does not name a Countersign item; nothing was recorded.")
		return
	}
	d := chat.Decision{Surface: bot.SurfaceSlack, UserID: c.who, Deliveries: c.deliveries, ItemID: id, Verb: chat.Approve, Grant: g}
	out := chat.Decide(ctx, a.bot, d)
	if out.Status == chat.Decided && out.Reply != "" {
		a.tell(ctx, c.channel, c.user, out.Reply) // the grant made, privately
		return
	}
	a.answer(ctx, c.channel, c.user, out)
}

// grantsCommand answers `/countersign grants` with the list and a Revoke
// button per grant; ok is false for any other command.
func (a *Adapter) grantsCommand(ctx context.Context, cmd slackgo.SlashCommand) (commandResponse, bool) {
	if v := chat.Scope(cmd.Text); v.Kind != chat.ScopeCommand || v.Command.Name != chat.CmdGrants {
		return commandResponse{}, false
	}
	who := a.who(cmd.UserID, cmd.TeamID, cmd.EnterpriseID)
	reply, ids := chat.ListGrants(ctx, a.bot, a.bot.Chat().Caller(bot.SurfaceSlack, who, nil), Sink, who)
	msg := text(reply.Text, maxMessageText)
	resp := commandResponse{ResponseType: slackgo.ResponseTypeEphemeral, Text: msg}
	if len(ids) == 0 {
		return resp, true
	}
	blocks := []slackgo.Block{slackgo.NewSectionBlock(plain(plainText(reply.Text, maxSectionText)), nil, nil)}
	var row []slackgo.BlockElement
	for i, n := range ids[:min(len(ids), maxRevokeButtons)] {
		b := slackgo.NewButtonBlockElement(actionRevokeGrant, strconv.FormatUint(n, 10), plain(fmt.Sprintf("Revoke grant #%d", n))).WithStyle(slackgo.StyleDanger)
		row = append(row, b)
		if len(row) == 5 || i == min(len(ids), maxRevokeButtons)-1 {
			blocks = append(blocks, slackgo.NewActionBlock(fmt.Sprintf("countersign-revoke:%d", i/5), row...))
			row = nil
		}
	}
	resp.Blocks = blocks
	return resp, true
}

// noteText is an EventNote as a thread reply.
func noteText(it bot.Item, note string) string {
	if note == "" {
		note = fmt.Sprintf("#%d: a note without text.", it.ID)
	}
	return "🔁 " + text(note, maxMessageText-2)
}
