package actiontools

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/google/jsonschema-go/jsonschema"
)

// Object is a JSON object argument, decoded with its numbers kept as
// written (json.Number), so that an approval binds the exact values the
// agent sent.
type Object map[string]any

// UnmarshalJSON accepts a JSON object (or null).
func (o *Object) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeOf(Object{})}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	*o = m
	return nil
}

// Text is a string argument that also takes any other JSON value, kept as
// compact JSON text (a dry-run plan given as an object, a turn given as a
// number).
type Text string

// JSONSchema says what Text accepts: any JSON value (a string is kept as
// it is, anything else as its compact JSON text).
func (Text) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"string", "object", "array", "number", "boolean", "null"}}
}

// UnmarshalJSON accepts a string, or any JSON value as its compact text.
func (t *Text) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = Text(s)
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	*t = Text(buf.String())
	return nil
}

func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "string"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

// checkID validates an identifier-like argument: at most max bytes, no
// white space or control characters.
func checkID(field, s string, max int) error {
	if len(s) > max {
		return bot.Invalid(field, "is %d bytes; the limit is %d", len(s), max)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r <= 0x20 || r == 0x7f }) {
		return bot.Invalid(field, "must not contain spaces or control characters")
	}
	return nil
}

// ConfirmArgs are confirm_action's arguments.
type ConfirmArgs struct {
	bot.Space
	Tool             string   `json:"tool" jsonschema:"the tool you want to call, as declared in config.yaml (for example delete_database)"`
	Arguments        Object   `json:"arguments,omitempty" jsonschema:"the exact arguments of that call (a JSON object); the approval is bound to exactly these, by SHA-256"`
	Summary          string   `json:"summary,omitempty" jsonschema:"one or two sentences for the approver: what the call does and why"`
	Category         string   `json:"category,omitempty" jsonschema:"your description of the action (read-only, mutating, destructive); recorded and shown, but the configured category decides the mechanics"`
	RequestedEffects []string `json:"requested_effects,omitempty" jsonschema:"the effects you expect, one per entry (for example: drop database prod)"`
	DryRun           Text     `json:"dry_run,omitempty" jsonschema:"the dry-run plan to show the approver; required for destructive tools"`
	ActionID         string   `json:"action_id,omitempty" jsonschema:"your idempotency key: the same action_id with the same body returns the same request; with a different body it is a 409"`
	CallbackURL      string   `json:"callback_url,omitempty" jsonschema:"where to POST the signed outcome once decided (its host must be in callbacks.allowed_hosts)"`
	Headless         bool     `json:"headless,omitempty" jsonschema:"true when no person is on the line (cron, CI): a call that needs a confirmation is then denied at once by automatic policy"`
}

// Validate checks sizes and shapes.
func (a *ConfirmArgs) Validate() error {
	if strings.TrimSpace(a.Tool) == "" {
		return bot.Invalid("tool", "required: name the tool you want to call")
	}
	if err := checkID("tool", a.Tool, 128); err != nil {
		return err
	}
	if err := bot.CheckText("summary", a.Summary, 4000, true); err != nil {
		return err
	}
	if err := bot.CheckText("category", a.Category, 64, true); err != nil {
		return err
	}
	if len(a.RequestedEffects) > 50 {
		return bot.Invalid("requested_effects", "lists %d effects; the limit is 50", len(a.RequestedEffects))
	}
	for _, e := range a.RequestedEffects {
		if err := bot.CheckText("requested_effects", e, 1000, true); err != nil {
			return err
		}
	}
	// dry_run's size is bounded before decoding (ArgLimits, 64 KiB by
	// default); here only its characters are checked.
	if err := bot.CheckText("dry_run", string(a.DryRun), math.MaxInt, true); err != nil {
		return err
	}
	if err := checkID("action_id", a.ActionID, 255); err != nil {
		return err
	}
	return checkID("callback_url", a.CallbackURL, 2048)
}

// DecideArgs are approve_action's and deny_action's arguments.
type DecideArgs struct {
	RequestID string `json:"request_id" jsonschema:"the request to decide (req_… or con_…)"`
	Reason    string `json:"reason,omitempty" jsonschema:"why; on a denial it reaches the agent"`
	// Arguments is an edit (approve_action only): the whole arguments
	// object to approve instead of the one proposed.
	Arguments Object `json:"arguments,omitempty" jsonschema:"approve_action only: to approve with changes, the whole edited arguments object (not a patch). It is validated like a new request (the tool's schema, the exec allowlist, the same category); under a quorum it restarts the count, and the agent receives it as approved_arguments"`
	// Grant is a standing grant made with this approval (grants.go).
	Grant *GrantArgs `json:"grant,omitempty" jsonschema:"also grant a standing approval of later matching calls, within the tool's grants: config (approve_action only)"`
	// ArgsSHA256 is the version of an action's arguments the approver
	// reviewed: when another approver's edit has replaced it since, the
	// approval is refused (409) and nothing is recorded.
	ArgsSHA256 string `json:"args_sha256,omitempty" jsonschema:"approve_action only, optional: the SHA-256 of the arguments you reviewed (action_status's edited_args_sha256 when edited, else args_sha256). If another approver's edit has changed them since, the approval is refused with 409 and nothing is recorded, so you never approve arguments you did not see"`
	// Seen is what the decider was shown (a surface's card or page),
	// recorded on the vote.
	Seen *SeenArgs `json:"seen,omitempty" jsonschema:"optional: what you were shown when you decided, recorded on your vote: the SHA-256 of the card's or page's text, the surface, whether it was cut to fit, and the digest of the facts it showed (an approval on facts that changed since is refused with 409)"`
	// BreakGlass asks to approve one's own request as break-glass
	// (breakglass.go): reason is then mandatory.
	BreakGlass bool `json:"break_glass,omitempty" jsonschema:"approve_action only: approve your own request of a tool under break_glass.tools, alone, as break-glass (a person's own request only, never an agent's; needs a reason and a fresh step-up). It is broadcast to every approver and opens a review that others must countersign"`
}

// SeenArgs is what a decider was shown: approve_action's and
// deny_action's seen argument (bot.Seen, plus the facts the card showed).
type SeenArgs struct {
	SHA256    string `json:"sha256" jsonschema:"the hex SHA-256 of the text of the card or page as rendered"`
	Surface   string `json:"surface" jsonschema:"where it was shown: slack, discord, web..."`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"true when the card was cut to fit the surface; refused on a destructive or dry-run-first request"`
	Facts     string `json:"facts,omitempty" jsonschema:"the digest of the context facts the card showed (bot.FactsDigest); empty: not checked"`
}

// validate checks a seen argument's shape.
func (s *SeenArgs) validate() error {
	if s == nil {
		return nil
	}
	if !isSHA256Hex(s.SHA256) {
		return bot.Invalid("seen.sha256", "must be the 64 lower-case hex digits of a SHA-256")
	}
	if s.Surface == "" || len(s.Surface) > 32 || strings.Trim(s.Surface, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return bot.Invalid("seen.surface", "must name the surface in lower-case letters, digits, _ or - (at most 32), such as slack")
	}
	if s.Facts != "" && !isSHA256Hex(s.Facts) {
		return bot.Invalid("seen.facts", "must be the 64 hex digits of the facts digest the card showed, or absent")
	}
	return nil
}

// seen is the argument as recorded on a vote; nil when absent.
func (s *SeenArgs) seen() *approvals.Seen {
	if s == nil {
		return nil
	}
	return &approvals.Seen{SHA256: s.SHA256, Surface: s.Surface, Truncated: s.Truncated}
}

// Validate checks the id and the reason.
func (a *DecideArgs) Validate() error {
	if err := checkRequestID(a.RequestID); err != nil {
		return err
	}
	if err := validateGrant(a.Grant); err != nil {
		return err
	}
	if a.ArgsSHA256 != "" && !isSHA256Hex(a.ArgsSHA256) {
		return bot.Invalid("args_sha256", "must be the 64 hex digits of a SHA-256, as action_status gives it (args_sha256, or edited_args_sha256 when edited)")
	}
	if err := a.Seen.validate(); err != nil {
		return err
	}
	return bot.CheckText("reason", a.Reason, 2000, true)
}

// isSHA256Hex reports whether s is 64 lower-case hex digits.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

func checkRequestID(id string) error {
	if id == "" {
		return bot.Invalid("request_id", "required")
	}
	if err := checkID("request_id", id, 64); err != nil {
		return err
	}
	return nil
}

// StatusArgs are action_status's arguments.
type StatusArgs struct {
	RequestID   string `json:"request_id" jsonschema:"the request (req_…, con_… or ask_…)"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (0 to 60) for a decision; the answer comes as soon as it is decided"`
}

// Validate checks the id and the wait.
func (a *StatusArgs) Validate() error {
	if err := checkRequestID(a.RequestID); err != nil {
		return err
	}
	if a.WaitSeconds < 0 || a.WaitSeconds > 60 {
		return bot.Invalid("wait_seconds", "must be between 0 and 60, not %d", a.WaitSeconds)
	}
	return nil
}

// AskArgs are ask_user's arguments.
type AskArgs struct {
	bot.Space
	Question    string   `json:"question" jsonschema:"one clear question for the user"`
	Options     []string `json:"options,omitempty" jsonschema:"the choices (up to 20); none means a free-text answer"`
	Multi       bool     `json:"multi,omitempty" jsonschema:"true when the user may choose several options"`
	Context     string   `json:"context,omitempty" jsonschema:"what the user needs to know to answer"`
	CallbackURL string   `json:"callback_url,omitempty" jsonschema:"where to POST the signed answer (its host must be in callbacks.allowed_hosts)"`
}

// Validate checks the question and its options.
func (a *AskArgs) Validate() error {
	if strings.TrimSpace(a.Question) == "" {
		return bot.Invalid("question", "required: ask one clear question")
	}
	if err := bot.CheckText("question", a.Question, 2000, true); err != nil {
		return err
	}
	if err := bot.CheckText("context", a.Context, 4000, true); err != nil {
		return err
	}
	if len(a.Options) > 20 {
		return bot.Invalid("options", "lists %d options; the limit is 20", len(a.Options))
	}
	seen := map[string]bool{}
	for _, o := range a.Options {
		k := strings.ToLower(strings.TrimSpace(o))
		if k == "" {
			return bot.Invalid("options", "an option is empty")
		}
		if seen[k] {
			return bot.Invalid("options", "%q is listed twice", o)
		}
		seen[k] = true
		if err := bot.CheckText("options", o, 200, true); err != nil {
			return err
		}
	}
	if a.Multi && len(a.Options) == 0 {
		return bot.Invalid("multi", "a multiple-choice question needs options")
	}
	return checkID("callback_url", a.CallbackURL, 2048)
}

// AnswerArgs are answer_question's arguments.
type AnswerArgs struct {
	RequestID string   `json:"request_id" jsonschema:"the question (ask_…)"`
	Answers   []string `json:"answers,omitempty" jsonschema:"the chosen options: exactly one, or several for a multiple-choice question"`
	Text      string   `json:"text,omitempty" jsonschema:"a free-text answer (for a question without options), or a note"`
	Decline   bool     `json:"decline,omitempty" jsonschema:"true to decline to answer; text then says why"`
}

// Validate checks the id and sizes.
func (a *AnswerArgs) Validate() error {
	if err := checkRequestID(a.RequestID); err != nil {
		return err
	}
	if len(a.Answers) > 20 {
		return bot.Invalid("answers", "lists %d answers; the limit is 20", len(a.Answers))
	}
	return bot.CheckText("text", a.Text, 4000, true)
}

// RequestApprovalArgs are request_approval's arguments.
type RequestApprovalArgs struct {
	bot.Space
	Action    string `json:"action" jsonschema:"the action awaiting approval, for example: delete the staging database"`
	Question  string `json:"question,omitempty" jsonschema:"one short question for the user (default: Go ahead?)"`
	Turn      Text   `json:"turn,omitempty" jsonschema:"the conversation turn it is asked in"`
	MessageID Text   `json:"message_id,omitempty" jsonschema:"the input message it is asked in"`
}

// Validate checks sizes.
func (a *RequestApprovalArgs) Validate() error {
	if strings.TrimSpace(a.Action) == "" {
		return bot.Invalid("action", "required: say which action awaits approval")
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"action", a.Action, 1000}, {"question", a.Question, 1000}, {"turn", string(a.Turn), 128}, {"message_id", string(a.MessageID), 256}} {
		if err := bot.CheckText(f.name, f.v, f.max, true); err != nil {
			return err
		}
	}
	return nil
}

// RecordApprovalArgs are record_approval's arguments.
type RecordApprovalArgs struct {
	bot.Space
	Action    string `json:"action" jsonschema:"the specific action the user approved"`
	Detail    string `json:"detail,omitempty" jsonschema:"extra context such as the command or scope; it is logged, so it must not contain secrets"`
	Turn      Text   `json:"turn,omitempty" jsonschema:"the conversation turn the consent was given in"`
	MessageID Text   `json:"message_id,omitempty" jsonschema:"the input message the consent was given in"`
	RequestID string `json:"request_id,omitempty" jsonschema:"the con_… request this consent answers, if you asked with request_approval"`
}

// Validate checks sizes.
func (a *RecordApprovalArgs) Validate() error {
	if strings.TrimSpace(a.Action) == "" {
		return bot.Invalid("action", "required: say which action the user approved")
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"action", a.Action, 1000}, {"detail", a.Detail, 2000}, {"turn", string(a.Turn), 128}, {"message_id", string(a.MessageID), 256}} {
		if err := bot.CheckText(f.name, f.v, f.max, true); err != nil {
			return err
		}
	}
	if a.RequestID != "" {
		return checkRequestID(a.RequestID)
	}
	return nil
}

// ModeArgs are set_approval_mode's arguments.
type ModeArgs struct {
	bot.Space
	Mode string `json:"mode" jsonschema:"off, normal or protective (synonyms: paranoid, careful, default, standard, yolo, none)"`
}

// SpaceArgs are get_approval_mode's arguments.
type SpaceArgs struct {
	bot.Space
}
