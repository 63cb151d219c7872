package actiontools

import (
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// toolList is every tool the service registers.
func (s *Service) toolList() []bot.Tool {
	return []bot.Tool{
		{
			Name: "confirm_action",
			Description: "Ask for a person's confirmation before calling a tool. The mechanics come from the tool's configured category, not from what you say: " +
				"read-only is approved at once (mechanics auto); mutating or undeclared waits for a confirmation (confirm); destructive needs a dry_run plan and a confirmation (dry_run_confirm). " +
				"Missing required arguments answer REQUIRES_CLARIFICATION: ask the user for them instead of guessing. An exec command not on the allowlist is refused outright. " +
				"Follow with action_status (wait_seconds up to 60) or a callback_url. When approved, call the tool with exactly the approved arguments and confirmed_by; when denied, change the plan and do not work around the refusal.",
			Capability:  policy.CapWrite,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        ConfirmArgs{},
			Handler:     s.confirm,
			ArgLimits: map[string]bot.ArgLimit{
				"arguments": {Bytes: orDefault(s.o.MaxArgumentsBytes, DefaultMaxArgBytes), Setting: "limits.max_arguments_bytes"},
				"dry_run":   {Bytes: orDefault(s.o.MaxDryRunBytes, DefaultMaxArgBytes), Setting: "limits.max_dry_run_bytes"},
			},
		},
		{
			Name:        "action_status",
			Description: "The state of a request (req_, con_ or ask_): status pending, approved, denied or expired (answered or declined for a question), confirmed_by, reason. With wait_seconds (up to 60) it waits and answers as soon as the request is decided.",
			Capability:  policy.CapRead,
			Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
			Args:        StatusArgs{},
			Handler:     s.status,
		},
		{
			Name:        "redeem_receipt",
			Description: "Redeem the receipt of an approved action (the receipt field of action_status or the callback) right before running the tool: it verifies the signature and expiry and records the action as executed, once. A second redemption is refused (409) naming when the first happened. Verify the receipt offline first (the client package does) and run exactly the approved arguments.",
			Capability:  policy.CapWrite,
			Args:        RedeemArgs{},
			Handler:     s.redeem,
		},
		{
			Name: "approve_action",
			Description: "Approve a pending request as yourself: you are recorded as confirmed_by. The requester, agents, service accounts and principals outside the tool's approvers cannot approve. With a quorum, each distinct approver counts once. A decided request keeps its first outcome. " +
				"To approve with changes, pass the whole edited arguments object in arguments: it is validated like a new request (the tool's JSON Schema, the exec allowlist, the same tool and category), the proposal and the approved version are both kept with their SHA-256, and under a quorum the edit restarts the count. " +
				"To also approve the agent's later matching calls, pass grant {kind: once|session|duration, for?: \"1h\", match?: {argument: value}} within the tool's grants: config; never on destructive, quorum or step-up tools, and not with an edit.",
			Capability:  policy.CapApprove,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        DecideArgs{},
			Handler:     s.decide(true),
			ArgLimits: map[string]bot.ArgLimit{
				"arguments": {Bytes: orDefault(s.o.MaxArgumentsBytes, DefaultMaxArgBytes), Setting: "limits.max_arguments_bytes"},
			},
		},
		{
			Name:        "deny_action",
			Description: "Deny a pending request; one denial denies, and the reason reaches the agent. A decided request keeps its first outcome.",
			Capability:  policy.CapApprove,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        DecideArgs{},
			Handler:     s.decide(false),
		},
		{
			Name:        "ask_user",
			Description: "Ask the user a structured question (single or multiple choice, or free text) in chat. The answer comes back through action_status (or the callback). An answer is a preference, never an approval: use confirm_action or request_approval for consent.",
			Capability:  policy.CapWrite,
			Args:        AskArgs{},
			Handler:     s.ask,
		},
		{
			Name:        "answer_question",
			Description: "Answer an ask_user question (the chat buttons call this): the chosen options, or a free-text answer, or decline. An answer never counts as an approval.",
			Capability:  policy.CapApprove,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        AnswerArgs{},
			Handler:     s.answer,
		},
		{
			Name:        "request_approval",
			Description: "Soft approval: ask the user's consent before a critical action, then end your turn. The result carries awaiting_approval: true. Consent is recorded and shown; it is guidance, not an enforcement point.",
			Capability:  policy.CapWrite,
			Args:        RequestApprovalArgs{},
			Handler:     s.requestApproval,
		},
		{
			Name:        "record_approval",
			Description: "Soft approval: record that the user approved an action in your conversation (a plain affirmative; a hesitant or negative reply is not approval), then carry it out. One approval covers one action.",
			Capability:  policy.CapWrite,
			Args:        RecordApprovalArgs{},
			Handler:     s.recordApproval,
		},
		{
			Name:        "set_approval_mode",
			Description: "Set the soft-approval mode of a memory space when the user asks you to be more or less careful: off, normal or protective (synonyms paranoid, careful, default, standard, yolo, none). It takes effect from the next call.",
			Capability:  policy.CapWrite,
			Annotations: bot.Annotations{Idempotent: true},
			Args:        ModeArgs{},
			Handler:     s.setMode,
		},
		{
			Name:        "get_approval_mode",
			Description: "The soft-approval mode of a memory space and the prompt text an agent harness puts in the system prompt for it (none for off).",
			Capability:  policy.CapRead,
			Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
			Args:        SpaceArgs{},
			Handler:     s.getMode,
		},
	}
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
