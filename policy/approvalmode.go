package policy

import (
	"fmt"
	"strings"
)

// ApprovalMode is the soft-approval level of a memory space: how often an
// agent asks for the user's consent before acting. It is guidance carried in
// the agent's system prompt, not an enforcement point.
type ApprovalMode string

// The soft-approval modes (seed 002).
const (
	ApprovalOff        ApprovalMode = "off"
	ApprovalNormal     ApprovalMode = "normal"
	ApprovalProtective ApprovalMode = "protective"
)

// DefaultApprovalMode is the mode of a space nobody set.
const DefaultApprovalMode = ApprovalNormal

// ParseApprovalMode reads a mode or a synonym, case-insensitively:
// paranoid and careful mean protective; default and standard mean normal;
// yolo and none mean off.
func ParseApprovalMode(s string) (ApprovalMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off", "yolo", "none":
		return ApprovalOff, nil
	case "normal", "default", "standard":
		return ApprovalNormal, nil
	case "protective", "paranoid", "careful":
		return ApprovalProtective, nil
	}
	return "", fmt.Errorf("%q is not an approval mode; use off, normal or protective (synonyms: paranoid and careful mean protective; default and standard mean normal; yolo and none mean off)", s)
}

// ApprovalPrompt is the text an agent harness puts in the system prompt for
// mode m. Off adds no prompt. Each prompt gives the reason for the pause, so
// that the model asks where it matters and nowhere else.
func ApprovalPrompt(m ApprovalMode) string {
	const common = "Plan the whole task first and batch the safe steps, so the user is asked once and not at every step. " +
		"Never pause to ask about read-only inspection (reading files, listing, searching, viewing logs or status): asking there spends the user's attention, which the pause exists to protect. " +
		"To ask, call request_approval with the specific action and one short question, then end your turn: the call is the pause, and the user's answer comes in the next turn. " +
		"When the user says yes, call record_approval with exactly what was approved, then carry it out. A plain affirmative is approval; a hesitant, conditional or negative reply is not, so do not act on it. " +
		"One approval covers one action. A category the user pre-authorizes (\"no need to ask for commits\"), or a workflow the user invoked by name, covers the actions it names; record that grant once. " +
		"This is guidance, not the gate: tools that Countersign holds for a confirmation (confirm_action) still wait for a person's decision whatever is recorded here."
	switch m {
	case ApprovalNormal:
		return "Ask the user before destructive or irreversible actions (deleting files or data, dropping records, force-pushing, rewriting history) and before outward-facing ones (pushing, publishing, opening pull requests, sending messages or mail, deploying, spending money): they cannot be taken back, or other people see them. " +
			"Ordinary edits and local, reversible changes proceed without asking. " + common
	case ApprovalProtective:
		return "The user asked for a careful session. Ask the user before any action that changes state: writing or deleting files, commits and pushes, installing or removing packages, requests with side effects, changes to shared resources, and any command that is not plainly read-only. " +
			"If you cannot tell whether a command only reads, treat it as one that changes state. " + common
	}
	return ""
}
