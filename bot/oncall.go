package bot

import (
	"strings"
)

// This file is an escalation to whoever is on call (approvals.
// escalation_oncall: the name of an oncall: rotation): the sweeper
// resolves the rotation at the time of the escalation, on its clock
// (Bot.OnCallNow), and the escalation's note names the rotation and the
// person (OnCallNote). Every surface reads them into the Note it renders
// (Note.OnCall, Note.Person): chat mentions the person where it can, and
// email writes to them alone.

// OnCallNote is what an escalation to rotation's on-call adds to its note
// (EscalationNote): "oncall=<rotation> person=<name>"; person "" says
// nobody was on call then. "" for no rotation.
func OnCallNote(rotation, person string) string {
	rotation = strings.TrimSpace(rotation)
	if rotation == "" || strings.ContainsAny(rotation, " =") {
		return ""
	}
	s := "oncall=" + rotation
	if p := strings.TrimSpace(person); p != "" && !strings.ContainsAny(p, " =") {
		s += " person=" + p
	}
	return s
}

// parseOnCall reads the words of an escalation's note that OnCallNote
// wrote; the other words come back in rest.
func parseOnCall(words []string) (rotation, person string, rest []string) {
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		switch {
		case ok && k == "oncall" && rotation == "":
			rotation = v
		case ok && k == "person" && person == "":
			person = v
		default:
			rest = append(rest, w)
		}
	}
	return rotation, person, rest
}

// OnCallLine is how an escalation names the on-call it is addressed to,
// for every surface: "Escalated to the ops on-call, bob." or, when nobody
// was on call, "Nobody is on call in ops now." ("" for no rotation).
func (n Note) OnCallLine() string {
	switch {
	case n.OnCall == "":
		return ""
	case n.Person == "":
		return "Nobody is on call in " + n.OnCall + " now."
	}
	return "Escalated to the " + n.OnCall + " on-call, " + n.Person + "."
}
