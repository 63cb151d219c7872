// Package claudecode is Countersign's Claude Code command hook: it reads
// one hook event (the JSON Claude Code writes on the hook's stdin), asks
// Countersign about a tool call with the Go client, and answers in the
// shape Claude Code documents for the event.
//
// It decides PreToolUse and PermissionRequest; it records PostToolUse of a
// call Countersign approved as executed (redeeming the receipt); every
// other event gets no answer at all. It fails closed: whenever it cannot
// show that a person (or the configured policy) approved exactly this
// call, with a receipt that verifies offline against the deployment's
// pinned key, it asks the person at the terminal, or denies, and never
// allows. An approval with changes reaches Claude Code as updatedInput, so
// what runs is what was approved.
//
// It imports only the standard library, client and receipt.
package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/receipt"
)

// MaxInputBytes bounds the hook's input: a larger event is asked about,
// not read.
const MaxInputBytes = 16 << 20

// The events the hook answers.
const (
	PreToolUse        = "PreToolUse"
	PermissionRequest = "PermissionRequest"
	PostToolUse       = "PostToolUse"
)

// Config is what the hook needs to know (hooks.claude_code in config.yaml).
type Config struct {
	// ReadOnly lists the tools allowed without asking Countersign.
	ReadOnly []string
	// BashTool is the declared tool a shell command (Bash, PowerShell) is
	// confirmed as, with arguments {"command": …}.
	BashTool string
	// DestructiveTool is the declared tool a command matching a
	// destructive pattern is confirmed as (declare it destructive: a dry
	// run is shown, no grant covers it). Empty: BashTool.
	DestructiveTool string
	// ReadOnlyCommands lists the commands that pass without asking when a
	// shell call is plainly one of them.
	ReadOnlyCommands []string
	// DestructivePatterns are matched against a shell command.
	DestructivePatterns []*regexp.Regexp
	// Wait bounds how long the hook waits for a decision before it asks
	// the person at the terminal.
	Wait time.Duration
	// UserID and AgentID name the memory space of the hook's requests; the
	// session is its run (run_id).
	UserID, AgentID string
	// StateDir is where the hook keeps an approved call's receipt between
	// PreToolUse and PostToolUse ("": PostToolUse records nothing).
	StateDir string
}

// Hook answers Claude Code's hook events.
type Hook struct {
	// Config is the hook's configuration.
	Config Config
	// Broken, when set, is why the hook has no usable configuration:
	// every tool call is then asked about, none allowed.
	Broken error
	// Client asks Countersign. When nil, only the read-only tools and
	// commands pass; every other call is asked about, with NoClient as
	// the reason.
	Client   *client.Client
	NoClient error
	// Log receives what the hook does and why it asks (Claude Code's
	// stderr for the hook: the debug log).
	Log io.Writer
	// Now is the clock of the state files; nil is time.Now.
	Now func() time.Time
}

// Event is the part of a hook event the hook reads.
type Event struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	// AgentType names the subagent a call comes from ("" for the main
	// thread).
	AgentType string `json:"agent_type"`
}

// Handle answers one event: raw is the hook's whole stdin. It returns what
// to print on stdout (nothing for events it does not answer); the exit
// status is always 0, since Claude Code ignores the JSON of any other
// status but 2, and 2 is not honored for PermissionRequest.
func (h *Hook) Handle(ctx context.Context, raw []byte) []byte {
	if len(raw) > MaxInputBytes {
		event := PreToolUse
		name := regexp.MustCompile(`"hook_event_name"\s*:\s*"(\w+)"`)
		if m := name.FindSubmatch(raw[:min(len(raw), 64<<10)]); m != nil {
			event = string(m[1])
		}
		if event != PreToolUse && event != PermissionRequest {
			return nil
		}
		return h.answer(event, h.ask(fmt.Sprintf("the hook's input is more than %d MiB, so Countersign's hook did not read it", MaxInputBytes>>20)))
	}
	var ev Event
	if err := json.Unmarshal(raw, &ev); err != nil || ev.HookEventName == "" {
		// Not an event the hook can read: the person decides.
		return h.answer(PreToolUse, h.ask("the hook could not read its input (want Claude Code's hook event JSON with hook_event_name)"))
	}
	switch ev.HookEventName {
	case PreToolUse, PermissionRequest:
		return h.answer(ev.HookEventName, h.decide(ctx, ev))
	case PostToolUse:
		return h.recordRun(ctx, ev)
	}
	return nil // not an event the hook decides
}

// decision is the hook's answer to one tool call.
type decision struct {
	verdict string // allow, deny or ask
	reason  string
	// updated is the approved arguments in Claude Code's tool input shape,
	// for an approval with changes.
	updated json.RawMessage
	// context is added to Claude's context (PreToolUse only).
	context string
	// notice is shown to the person (systemMessage).
	notice string
}

func (h *Hook) logf(format string, args ...any) {
	if h.Log != nil {
		fmt.Fprintf(h.Log, "countersign: "+format+"\n", args...)
	}
}

// ask is the fail-closed answer: the person at the terminal decides. The
// reason goes to stderr too.
func (h *Hook) ask(why string) decision {
	h.logf("asking the person instead: %s", why)
	return decision{verdict: "ask", reason: "Countersign: " + why + "; decide here"}
}

func (h *Hook) deny(why string) decision {
	h.logf("denied: %s", why)
	return decision{verdict: "deny", reason: "Countersign: " + why}
}

func allow(why string) decision { return decision{verdict: "allow", reason: "Countersign: " + why} }

// call is one tool call as Countersign is asked about it, and how its
// approved arguments map back onto Claude Code's tool input.
type call struct {
	action client.Action
	shell  bool            // a shell tool: arguments {"command"}
	input  json.RawMessage // Claude Code's tool_input, an object
}

// decide is the hook's answer to a PreToolUse or PermissionRequest event.
func (h *Hook) decide(ctx context.Context, ev Event) decision {
	if h.Broken != nil {
		return h.ask("the hook is not set up (" + h.Broken.Error() + ")")
	}
	if ev.ToolName == "" {
		return h.ask("the event names no tool (tool_name)")
	}
	if slices.Contains(h.Config.ReadOnly, ev.ToolName) {
		return allow(ev.ToolName + " is read-only (hooks.claude_code.read_only)")
	}
	c, d, ok := h.plan(ev)
	if !ok {
		return d
	}
	if h.Client == nil {
		why := "no client"
		if h.NoClient != nil {
			why = h.NoClient.Error()
		}
		return h.ask("the server cannot be asked (" + why + ")")
	}
	ctx, cancel := context.WithTimeout(ctx, h.Config.Wait)
	defer cancel()
	cl := *h.Client
	cl.OnPending = func(id string) {
		h.logf("waiting up to %s for a person to decide %s (%s)", h.Config.Wait, id, c.action.Tool)
	}
	ap, err := cl.ConfirmAction(ctx, c.action)
	if err != nil {
		return h.refusal(c, err)
	}
	return h.approved(ev, c, ap)
}

// plan maps the event's tool call onto confirm_action, or decides it
// locally (ok false: d is the answer).
func (h *Hook) plan(ev Event) (c call, d decision, ok bool) {
	in := ev.ToolInput
	if t := strings.TrimSpace(string(in)); t == "" || t == "null" {
		in = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(in, &obj); err != nil || obj == nil {
		return c, h.ask("the " + ev.ToolName + " call's tool_input is not a JSON object"), false
	}
	if lossy(in) {
		return c, h.ask("the " + ev.ToolName + " call's tool_input holds text that is not valid Unicode (invalid UTF-8 or a lone surrogate), so what a person would approve is not exactly what would run"), false
	}
	c.input = in
	a := client.Action{Tool: ev.ToolName, Arguments: in, UserID: h.Config.UserID, AgentID: h.Config.AgentID, RunID: ev.SessionID}
	what := "use " + ev.ToolName
	if ev.ToolName == "Bash" || ev.ToolName == "PowerShell" {
		var sh struct {
			Command     *string `json:"command"`
			Description string  `json:"description"`
		}
		if json.Unmarshal(in, &sh) != nil || sh.Command == nil || strings.TrimSpace(*sh.Command) == "" {
			return c, h.ask("the " + ev.ToolName + " call carries no command to confirm"), false
		}
		cmd := *sh.Command
		c.shell = true
		args, _ := json.Marshal(map[string]string{"command": cmd})
		a.Arguments, a.Tool = args, h.Config.BashTool
		switch {
		case destructive(cmd, h.Config.DestructivePatterns):
			if h.Config.DestructiveTool != "" {
				a.Tool = h.Config.DestructiveTool
			}
			a.Category = "destructive"
			a.DryRun = "A shell command has no dry run: this is exactly what Claude Code will run, in " + orUnknown(ev.Cwd) + ":\n\n" + cmd
		default:
			if entry, ro := readOnlyCommand(cmd, h.Config.ReadOnlyCommands); ro {
				return c, allow(fmt.Sprintf("%q is read-only (hooks.claude_code.read_only_commands: %s)", clip(cmd, 200), entry)), false
			}
		}
		what = "run: " + clip(cmd, 2000)
		if sh.Description != "" {
			what += "\n(" + clip(sh.Description, 500) + ")"
		}
	} else {
		var f struct {
			Path string `json:"file_path"`
		}
		if json.Unmarshal(in, &f) == nil && f.Path != "" {
			what += " on " + clip(f.Path, 1000)
			a.RequestedEffects = []string{clean(ev.ToolName + " " + clip(f.Path, 900))}
		}
	}
	where := "Session " + orUnknown(ev.SessionID) + " · working directory " + orUnknown(ev.Cwd)
	if ev.AgentType != "" {
		where += " · subagent " + ev.AgentType
	}
	a.Summary = clean(clip("Claude Code wants to "+what+"\n"+where, 3900))
	c.action = a
	return c, d, true
}

// approved is the answer to a verified approval: allow, with the approved
// arguments as updatedInput when an approver changed them.
func (h *Hook) approved(ev Event, c call, ap *client.Approval) decision {
	by := "by " + ap.ConfirmedBy
	switch {
	case ap.ConfirmedBy == "":
		by = "automatically (" + ap.Tool + " is read-only)"
	case strings.HasPrefix(ap.ConfirmedBy, "grant "):
		by = "under " + ap.ConfirmedBy
	}
	who := "approved " + by
	d := allow(fmt.Sprintf("%s (%s)", who, ap.RequestID))
	run := c.input
	if ap.Edited {
		updated, err := c.toInput(ap.Arguments)
		if err != nil {
			return h.deny(fmt.Sprintf("%s was %s with changes that Claude Code cannot apply to %s (%v). The approved arguments are %s: make exactly that call instead, or ask again",
				ap.RequestID, "approved "+by, ev.ToolName, err, clip(string(ap.Arguments), 4000)))
		}
		changes := ap.Changes
		if changes == "" {
			changes = "the arguments were changed"
		}
		d = allow(fmt.Sprintf("%s with changes (%s): %s; Claude Code runs the approved version", who, ap.RequestID, changes))
		d.updated = updated
		d.context = "Before approving, the approver changed this call's arguments (" + changes + "). It runs with the approved version, not the one you proposed."
		run = updated
	}
	h.logf("%s %s: allowed (%s)", ap.RequestID, ap.Tool, who)
	if err := h.saveRun(ev, run, ap); err != nil {
		h.logf("could not keep the receipt of %s for PostToolUse: %v", ap.RequestID, err)
		d.notice = fmt.Sprintf("Countersign: %s is allowed, but the hook could not keep its receipt (%v), so it will not be recorded as executed.", ap.RequestID, err)
	}
	return d
}

// toInput maps approved arguments back onto Claude Code's tool input: the
// whole object for a tool asked under its own name; for a shell call, the
// input with its command replaced.
func (c call) toInput(approved json.RawMessage) (json.RawMessage, error) {
	if !c.shell {
		return approved, nil
	}
	var a map[string]json.RawMessage
	if err := json.Unmarshal(approved, &a); err != nil {
		return nil, err
	}
	var cmd string
	if err := json.Unmarshal(a["command"], &cmd); len(a) != 1 || err != nil || strings.TrimSpace(cmd) == "" {
		return nil, errors.New(`a shell call's approved arguments must be exactly {"command": "…"}`)
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(c.input, &in); err != nil {
		return nil, err
	}
	in["command"] = a["command"]
	return json.Marshal(in)
}

// refusal is the answer when no verified approval came: deny what
// Countersign refused, ask about everything else.
func (h *Hook) refusal(c call, err error) decision {
	var (
		denied  *client.Denied
		expired *client.Expired
		clarify *client.NeedsClarification
		pending *client.Pending
		apiErr  *client.APIError
		trans   *client.TransportError
	)
	switch {
	case errors.As(err, &denied):
		return h.deny(orText(denied.Text, denied.RequestID+" was denied: "+denied.Reason))
	case errors.As(err, &expired):
		return h.deny(orText(expired.Text, expired.RequestID+" expired unanswered: "+expired.Reason))
	case errors.As(err, &clarify):
		return h.deny(orText(clarify.Text, "missing "+strings.Join(clarify.Missing, ", ")))
	case errors.As(err, &pending):
		if errors.Is(err, context.DeadlineExceeded) {
			return h.ask(fmt.Sprintf("request %s is still pending after %s; approve or deny it in chat, or", pending.RequestID, h.Config.Wait))
		}
		return h.ask(fmt.Sprintf("the wait for request %s ended without a decision (%v); it is still pending there, or", pending.RequestID, pending.Err))
	case errors.Is(err, client.ErrReceipt):
		return h.ask("the answer about this call could not be verified (" + err.Error() + "), so it is not allowed on that answer")
	case errors.As(err, &apiErr):
		return h.apiRefusal(c, apiErr)
	case errors.As(err, &trans):
		return h.ask("the server is unreachable at " + h.Client.API.URL() + " (" + trans.Err.Error() + ")")
	}
	return h.ask("the server could not decide (" + err.Error() + ")")
}

// apiRefusal answers a non-200 of confirm_action: a refusal by policy
// (403) or of the call's arguments (400) is a denial whose reason Claude
// sees; a key Countersign does not accept, an oversize call, a rate limit
// or a server fault is asked about.
func (h *Hook) apiRefusal(c call, e *client.APIError) decision {
	switch {
	case e.Status == http.StatusBadRequest && c.shell && e.Field == "arguments.command":
		// An exec-style tool's allowlist matches single commands only: a
		// pipeline or compound command is not refused for its shape.
		return h.ask(c.action.Tool + "'s allowlist matches single commands, and this one is not (" + e.Message + ")")
	case e.Status == http.StatusForbidden || e.Status == http.StatusBadRequest:
		return h.deny("refused: " + e.Message)
	case e.Status == http.StatusUnauthorized:
		return h.ask("the server does not accept the hook's key (HTTP 401: " + e.Message + "); set COUNTERSIGN_KEY to an agent key")
	case e.Status == http.StatusRequestEntityTooLarge:
		return h.ask("this call is too large to confirm (HTTP 413: " + e.Message + ")")
	}
	return h.ask(fmt.Sprintf("the server could not decide (HTTP %d: %s)", e.Status, e.Message))
}

// recordRun is PostToolUse: when Countersign approved this call, redeem its
// receipt so the audit chain records it executed. It answers nothing
// unless the call that ran is not the one approved, or recording fails.
func (h *Hook) recordRun(ctx context.Context, ev Event) []byte {
	st, err := h.takeRun(ev)
	if err != nil {
		h.logf("PostToolUse: reading the kept receipt: %v", err)
	}
	if st == nil {
		return nil // not a call Countersign approved through this hook
	}
	notice := func(msg string) []byte {
		h.logf("%s", msg)
		b, _ := marshal(output{SystemMessage: "Countersign: " + msg})
		return b
	}
	args := ev.ToolInput
	if st.Shell {
		var sh struct {
			Command string `json:"command"`
		}
		json.Unmarshal(ev.ToolInput, &sh)
		args, _ = json.Marshal(map[string]string{"command": sh.Command})
	}
	if hash, err := receipt.ArgsHash(st.Tool, args); err != nil || hash != st.ApprovedArgsSHA256 {
		return notice(fmt.Sprintf("the %s call that ran is not the one approved in %s (its arguments hash differently), so it is not recorded as executed", ev.ToolName, st.RequestID))
	}
	if h.Client == nil {
		return notice(fmt.Sprintf("%s ran, but the server cannot be asked to record it (%v)", st.RequestID, h.NoClient))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := h.Client.Redeem(ctx, st.Receipt); err != nil {
		return notice(fmt.Sprintf("%s ran, but recording it as executed failed: %v", st.RequestID, err))
	}
	h.logf("%s %s: recorded as executed", st.RequestID, st.Tool)
	return nil
}

// output is the hook's stdout JSON (the fields it uses).
type output struct {
	HookSpecificOutput any    `json:"hookSpecificOutput,omitempty"`
	SystemMessage      string `json:"systemMessage,omitempty"`
}

type preToolUseOutput struct {
	HookEventName            string          `json:"hookEventName"`
	PermissionDecision       string          `json:"permissionDecision"`
	PermissionDecisionReason string          `json:"permissionDecisionReason"`
	UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
	AdditionalContext        string          `json:"additionalContext,omitempty"`
}

type permissionRequestOutput struct {
	HookEventName string                    `json:"hookEventName"`
	Decision      permissionRequestDecision `json:"decision"`
}

type permissionRequestDecision struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

// answer prints d in the shape Claude Code documents for event.
// PreToolUse: hookSpecificOutput.permissionDecision allow|deny|ask, its
// reason, updatedInput for an approval with changes. PermissionRequest:
// hookSpecificOutput.decision.behavior allow|deny, with updatedInput or
// message; it has no "ask", so asking is no decision at all (Claude Code
// then shows its own dialog), with the reason as a systemMessage.
func (h *Hook) answer(event string, d decision) []byte {
	out := output{SystemMessage: d.notice}
	if event == PermissionRequest {
		if d.verdict == "ask" {
			out.SystemMessage = d.reason
		} else {
			dec := permissionRequestDecision{Behavior: d.verdict}
			if d.verdict == "allow" {
				dec.UpdatedInput = d.updated
			} else {
				dec.Message = d.reason
			}
			out.HookSpecificOutput = permissionRequestOutput{HookEventName: event, Decision: dec}
		}
	} else {
		out.HookSpecificOutput = preToolUseOutput{HookEventName: PreToolUse, PermissionDecision: d.verdict,
			PermissionDecisionReason: d.reason, UpdatedInput: d.updated, AdditionalContext: d.context}
	}
	b, err := marshal(out)
	if err != nil {
		// Unreachable for these types; still never an allow.
		b, _ = marshal(output{SystemMessage: "Countersign's hook could not write its answer"})
	}
	return b
}

// marshal encodes v as one line of JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(sb.String()), nil
}

func orText(text, fallback string) string {
	if strings.TrimSpace(text) != "" {
		return text
	}
	return fallback
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// clean writes control characters other than tab and line breaks as
// \uXXXX, so a command's escape sequences reach the approver visible.
func clean(s string) string {
	var b strings.Builder
	for _, r := range s {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lossy reports whether decoding raw loses text: invalid UTF-8, or a lone
// surrogate escape, which JSON decoders turn into U+FFFD. The approval
// would then bind (and show) the replacement while Claude Code runs the
// original.
func lossy(raw []byte) bool {
	if !utf8.Valid(raw) {
		return true
	}
	canon, err := receipt.Canonical(raw)
	if err != nil {
		return true
	}
	literal := bytes.Count(raw, []byte("\uFFFD"))
	for i := 0; i < len(raw)-1; i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] == 'u' && i+6 <= len(raw) && strings.EqualFold(string(raw[i+2:i+6]), "fffd") {
			literal++ // an escaped U+FFFD, written as such
		}
		i++ // skip the escaped character (an escaped backslash included)
	}
	return bytes.Count(canon, []byte("\uFFFD")) > literal
}
