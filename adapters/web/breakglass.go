package web

import (
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// breakGlassView offers the caller's own pending request of a tool under
// break_glass.tools to be approved by them alone (bot.Item.BreakGlass):
// after a fresh sign-in, with a reason, posted as action break_glass to
// the decide route. Whether they may is the one decision rule's, in
// approve_action; the page only offers it.
func (h *Handler) breakGlassView(caller *bot.Caller, it bot.Item, d *itemData) {
	if !caller.MayOfferBreakGlass(it) {
		return
	}
	d.BreakGlass = true
	if !caller.SteppedUp(it.BreakGlass, h.now()) {
		d.BreakGlassStepUp = chat.RoundDuration(it.BreakGlass)
	}
}
