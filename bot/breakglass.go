package bot

import "github.com/countersign/countersign/policy"

// KindBreakGlassReview is the item kind of a break-glass review: a
// person's approval of their own request, which reviewers countersign
// (bot/actiontools/breakglass.go).
const KindBreakGlassReview ItemKind = "break_glass_review"

// MayOfferBreakGlass reports whether a surface offers the caller to
// approve item it as break-glass (Item.BreakGlass): a pending item whose
// tool is listed under break_glass.tools, requested by the caller
// themselves. It decides nothing: approve_action asks the one decision
// rule, with its break-glass exception (policy.BreakGlass), whether they
// may, and records the refusal if not.
func (c *Caller) MayOfferBreakGlass(it Item) bool {
	if c == nil || it.BreakGlass <= 0 || !it.Pending() || c.Kind != "person" {
		return false
	}
	name, id := splitDisplay(it.Requester)
	return policy.SamePrincipal(id, name, c.ID, c.Name)
}
