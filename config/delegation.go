package config

// This file holds the configuration of on-call in the escalation ladder
// (docs/policy.md, "On-call"): approvals.escalation_oncall names an
// oncall: rotation, and an escalation goes to whoever is on call in it at
// the time of the escalation. Delegation itself takes no configuration:
// people set it (the delegate chat command, the console's delegation
// page), and its bounds are the one decision rule's (policy/delegation.go).

// validateOnCallLadder checks approvals.escalation_oncall: it names a
// rotation under oncall:, and there is an escalation to address.
func validateOnCallLadder(c *Config, p *problems) {
	a := c.Approvals
	if a.EscalationOnCall == "" {
		return
	}
	if !c.hasRotation(a.EscalationOnCall) {
		p.add("approvals.escalation_oncall", "%q is not a rotation under oncall:; declare it there (people, start, length) or name one that is", a.EscalationOnCall)
	}
	if a.EscalateAfter <= 0 {
		p.add("approvals.escalation_oncall", "is set but approvals.escalate_after is not, so nothing is ever escalated; set escalate_after (for example 20m)")
	}
}
