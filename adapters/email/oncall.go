package email

import (
	"log/slog"
	"strings"

	"github.com/countersign/countersign/bot"
)

// onCallOnly narrows the recipients of an escalation addressed to an
// on-call rotation (bot.Note.Person) to the person on call, when they are
// among to (they may decide the item and have an address). When they are
// not, or nobody was on call, every recipient is kept and it is logged:
// an escalation that reaches nobody would be worse than one that reaches
// the others.
func onCallOnly(to []Person, n bot.Note, log *slog.Logger) []Person {
	if n.OnCall == "" {
		return to
	}
	for _, p := range to {
		if n.Person != "" && strings.EqualFold(p.Name, n.Person) {
			return []Person{p}
		}
	}
	log.Warn("escalation to an on-call: the person on call cannot be emailed (no principals[].email, or they may not decide the item); emailing everyone who may decide it",
		"oncall", n.OnCall, "person", n.Person)
	return to
}
