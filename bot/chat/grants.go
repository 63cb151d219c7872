package chat

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/bot"
)

// The tools the grant commands and buttons call.
const (
	toolListGrants  = "list_grants"
	toolRevokeGrant = "revoke_grant"
)

// grants lists the standing grants in force that the person may see,
// through list_grants (its scope rule), with how to revoke one.
func (s session) grants(ctx context.Context) string {
	if msg, ok := s.mapped(ctx, CmdGrants); !ok {
		return msg
	}
	if !hasTool(s.b, toolListGrants) {
		return "`grants` is not available: this Countersign runs without the action tools."
	}
	res, err := s.b.Call(ctx, s.caller, toolListGrants, []byte(`{}`))
	if err != nil {
		return s.failure(err, couldNotComplete, "listing grants", "tool", toolListGrants)
	}
	text := res.Text
	if len(grantIDs(res)) > 0 {
		text += "\nRevoke one with `revoke-grant <n>` (or its Revoke button): the next matching call waits for a person again."
	}
	return text
}

// revokeGrant revokes grant #id through revoke_grant, as the person.
func (s session) revokeGrant(ctx context.Context, id uint64) string {
	if msg, ok := s.mapped(ctx, CmdRevokeGrant); !ok {
		return msg
	}
	if !hasTool(s.b, toolRevokeGrant) {
		return "`revoke-grant` is not available: this Countersign runs without the action tools."
	}
	res, err := s.b.Call(ctx, s.caller, toolRevokeGrant, fmt.Appendf(nil, `{"grant_id":%d}`, id))
	if err != nil {
		return s.failure(err, couldNotComplete, "revoking a grant", "tool", toolRevokeGrant)
	}
	return res.Text
}

// grantIDs are the numbers of the grants a list_grants result lists, in
// its order (for a surface's Revoke buttons).
func grantIDs(res bot.Result) []uint64 {
	var out []uint64
	for _, g := range res.Grants {
		out = append(out, g.ID)
	}
	return out
}

// RevokeGrant revokes grant #id for a person who clicked its Revoke button
// on surface, mapped through the chat directory (or d.Caller when the
// surface authenticated the person itself): the same revoke_grant call as
// the API's, which checks approve, scope and approvers and audits. It
// returns the private reply.
func RevokeGrant(ctx context.Context, b *bot.Bot, d Decision, id uint64) string {
	if d.UserID == "" {
		return "Countersign could not tell who sent this, so it did nothing."
	}
	if len(d.Deliveries) > 0 {
		first, err := b.Deliveries().First(ctx, d.Deliveries...)
		if err != nil {
			b.Logger().Error("chat: recording a delivery failed; nothing applied", "surface", d.Surface, "err", err)
			return couldNotComplete
		}
		if !first {
			return fmt.Sprintf("Countersign already received this for grant #%d; it was not applied twice.", id)
		}
	}
	caller := d.caller(b)
	if caller == nil {
		refuse(ctx, b, d, nil, bot.Space{}, fmt.Sprintf("revoke grant #%d refused: %s user %s is not mapped to a principal", id, d.Surface, bot.OneLine(d.UserID, 64)))
		return fmt.Sprintf("Access denied: I can't revoke grant #%d for you. %s", id, unmappedNote(d.Surface, d.UserID))
	}
	res, err := b.Call(ctx, caller, toolRevokeGrant, fmt.Appendf(nil, `{"grant_id":%d}`, id))
	if err != nil {
		s := session{b: b, caller: caller, surface: d.Surface, user: d.UserID}
		return s.failure(err, couldNotComplete, "revoking a grant", "tool", toolRevokeGrant)
	}
	return res.Text
}

// ListGrants is the `grants` command's answer for a surface that renders
// Revoke buttons: the reply text and the numbers of the grants listed.
func ListGrants(ctx context.Context, b *bot.Bot, caller *bot.Caller, surface, chatUserID string) (Reply, []uint64) {
	s := session{b: b, caller: caller, surface: surface, user: chatUserID}
	if caller == nil || !hasTool(b, toolListGrants) {
		return Reply{Text: s.grants(ctx), Private: true}, nil
	}
	res, err := b.Call(ctx, caller, toolListGrants, []byte(`{}`))
	if err != nil {
		return Reply{Text: s.failure(err, couldNotComplete, "listing grants", "tool", toolListGrants), Private: true}, nil
	}
	ids := grantIDs(res)
	text := res.Text
	if len(ids) > 0 {
		text += "\nRevoke one with its button or `revoke-grant <n>`."
	}
	return Reply{Text: text, Private: true}, ids
}

// grantMade is the private reply to an approval that made a standing
// grant (the result's one Grants entry), on one line; "" for none.
func grantMade(res bot.Result) string {
	if len(res.Grants) != 1 {
		return ""
	}
	return "Approved. You made " + bot.OneLine(res.Grants[0].Says, 600)
}
