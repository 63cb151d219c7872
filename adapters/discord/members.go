package discord

import (
	"context"

	"github.com/bwmarrin/discordgo"
	"github.com/countersign/countersign/bot"
)

// In gateway mode with Options.MemberEvents, Discord tells Countersign
// when someone leaves the server (or is kicked or banned): a
// GUILD_MEMBER_REMOVE. The principal that Discord user is mapped to
// (principals[].discord) is then suspended from approving
// (bot.Chat.SuspendAccount: stored, audited, on every replica; their
// approvals of pending requests stop counting), until an admin lifts it
// (lift_suspension). Someone who acts only through a mapped Discord role
// needs nothing: leaving the server takes the role with it. HTTP
// interactions mode receives no gateway events, so it cannot see anyone
// leave: there an admin suspends the principal (suspend_principal).

// memberLeft suspends the principal of a member who left the server
// (the configured guild_id's, or any server the bot is in when none is).
func (a *Adapter) memberLeft(ctx context.Context, m *discordgo.GuildMemberRemove) {
	if m == nil || m.Member == nil || m.User == nil || m.User.ID == "" {
		return
	}
	if a.guildID != "" && m.GuildID != a.guildID {
		return
	}
	name, recorded, err := a.bot.Chat().SuspendAccount(ctx, bot.SurfaceDiscord, m.User.ID, "left or was removed from the Discord server "+m.GuildID)
	switch {
	case err != nil:
		a.log.Error("discord member left; suspension not recorded", "user", m.User.ID, "err", err)
	case name == "":
		a.log.Info("discord member left; not mapped to a principal", "user", m.User.ID)
	case recorded:
		a.log.Warn("discord member left: principal suspended from approving", "user", m.User.ID, "principal", name)
	}
}
