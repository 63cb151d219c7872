package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// hookKeyEnv names the environment variable `countersign hook` reads its key
// from (COUNTERSIGN_API_KEY, as for `countersign mcp`, is read after it).
const hookKeyEnv = "COUNTERSIGN_KEY"

// hookInput is the JSON Claude Code writes on a command hook's stdin for
// PreToolUse and PermissionRequest (the fields this hook reads).
type hookInput struct {
	SessionID     string          `json:"session_id"`
	TranscriptURL string          `json:"transcript_path"`
	Cwd           string          `json:"cwd"`
	Event         string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
}

// hookDecision is what the hook decided: allow, deny or ask, and why.
type hookDecision struct {
	Decision string
	Reason   string
}

// cmdHook runs `countersign hook claude-code`: it reads one hook event on
// stdin, asks the running server (confirm_action, then action_status) and
// prints Claude Code's decision JSON on stdout. It fails closed: on any
// error it answers "ask" (the person at the terminal decides), never
// "allow".
func cmdHook(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "claude-code" {
		return errors.New("usage: countersign hook claude-code [--config FILE] [--key KEY] [--url URL] (the hook event JSON on stdin)")
	}
	fs := newFlagSet("hook claude-code", stderr)
	load := configFlag(fs)
	keyFlag := fs.String("key", "", "an agent's API key (default: $"+hookKeyEnv+", else $"+apiKeyEnv+")")
	urlFlag := fs.String("url", "", "the server's base URL (default $"+urlEnv+", else http:// and the config's listen)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, 4<<20))
	if err != nil {
		return fmt.Errorf("hook: reading stdin: %w", err)
	}
	var in hookInput
	if err := json.Unmarshal(raw, &in); err != nil || in.ToolName == "" {
		// Not a tool event: say so to the person, decide nothing.
		return writeHookOutput(stdout, "PreToolUse", hookDecision{"ask", "Countersign could not read the hook input (want Claude Code's PreToolUse or PermissionRequest JSON with tool_name and tool_input)"})
	}
	event := in.Event
	if event != "PermissionRequest" {
		event = "PreToolUse"
	}
	key := *keyFlag
	if key == "" {
		key = getenv(hookKeyEnv)
	}
	if key == "" {
		key = getenv(apiKeyEnv)
	}
	base, err := serverURL(*urlFlag, func() (*Config, error) { return cfg, nil }, getenv)
	if err != nil {
		return err
	}
	h := claudeHook{cfg: cfg.Hooks.ClaudeCode, base: base, key: key, client: &http.Client{}, now: time.Now, log: stderr}
	return writeHookOutput(stdout, event, h.decide(ctx, in))
}

// claudeHook maps one Claude Code tool call onto confirm_action.
type claudeHook struct {
	cfg    ClaudeCodeHookConfig
	base   string
	key    string
	client *http.Client
	now    func() time.Time
	// log is where the hook says what it waits for (Claude Code's stderr).
	log io.Writer
}

// decide is the hook's answer for one tool call.
func (h claudeHook) decide(ctx context.Context, in hookInput) hookDecision {
	if slices.Contains(h.cfg.ReadOnly, in.ToolName) {
		return hookDecision{"allow", "Countersign: " + in.ToolName + " is read-only (hooks.claude_code.read_only)"}
	}
	tool, args := in.ToolName, in.ToolInput
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	summary := "Claude Code wants to use " + in.ToolName
	if in.ToolName == "Bash" {
		var b struct {
			Command     string `json:"command"`
			Description string `json:"description"`
		}
		if json.Unmarshal(args, &b) != nil || strings.TrimSpace(b.Command) == "" {
			return hookDecision{"ask", "Countersign: the Bash call carries no command to confirm"}
		}
		tool = h.cfg.BashTool
		args, _ = json.Marshal(map[string]string{"command": b.Command})
		summary = "Claude Code wants to run: " + b.Command
		if b.Description != "" {
			summary += " (" + b.Description + ")"
		}
	}
	if in.Cwd != "" {
		summary += " in " + in.Cwd
	}
	if len(summary) > 3000 {
		summary = summary[:3000] + "…"
	}
	deadline := h.now().Add(h.cfg.Wait)
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(5*time.Second))
	defer cancel()
	res, err := h.call(ctx, "confirm_action", map[string]any{"tool": tool, "arguments": args, "summary": summary, "category": "from Claude Code"})
	for said := false; ; said = true {
		if d, done := h.outcome(res, err); done {
			return d
		}
		if !said {
			fmt.Fprintf(h.log, "countersign: waiting up to %s for a person to decide %s (%s)\n", h.cfg.Wait, res.id(), tool)
		}
		left := deadline.Sub(h.now())
		if left <= 0 {
			return hookDecision{"ask", fmt.Sprintf("Countersign request %s is still pending after %s; approve or deny it in chat, or decide here", res.id(), h.cfg.Wait)}
		}
		wait := max(1, min(int(left/time.Second), 60))
		res, err = h.call(ctx, "action_status", map[string]any{"request_id": res.id(), "wait_seconds": wait})
	}
}

// hookReply is one answer of the HTTP API.
type hookReply struct {
	status int
	Text   string         `json:"text"`
	Data   map[string]any `json:"data"`
	Error  string         `json:"error"`
}

func (r hookReply) id() string { s, _ := r.Data["request_id"].(string); return s }

// outcome reads one answer: a decision (done), or pending (not done).
func (h claudeHook) outcome(r hookReply, err error) (hookDecision, bool) {
	if err != nil {
		return hookDecision{"ask", "Countersign is unreachable (" + err.Error() + "); decide here"}, true
	}
	switch {
	case r.status == http.StatusOK:
	case r.status == http.StatusUnauthorized || r.status == http.StatusTooManyRequests || r.status >= 500:
		// Countersign cannot answer for this call: the person decides.
		return hookDecision{"ask", fmt.Sprintf("Countersign could not decide (HTTP %d: %s); decide here", r.status, r.Error)}, true
	default:
		// Countersign refused the call (a command off the allowlist, a bad
		// argument, access denied): deny, with its reason.
		return hookDecision{"deny", "Countersign refused: " + r.Error}, true
	}
	switch s, _ := r.Data["status"].(string); s {
	case "approved":
		if by, _ := r.Data["confirmed_by"].(string); by != "" {
			return hookDecision{"allow", "Countersign: approved by " + by + " (" + r.id() + ")"}, true
		}
		// Approved by policy (a read-only command): its reason says so.
		why, _ := r.Data["reason"].(string)
		return hookDecision{"allow", "Countersign: " + why + " (" + r.id() + ")"}, true
	case "pending":
		if r.id() == "" {
			return hookDecision{"ask", "Countersign answered pending without a request id; decide here"}, true
		}
		return hookDecision{}, false
	case "denied", "expired":
		return hookDecision{"deny", "Countersign: " + r.Text}, true
	default:
		return hookDecision{"ask", "Countersign answered status " + s + "; decide here"}, true
	}
}

// call posts one tool call to the HTTP API.
func (h claudeHook) call(ctx context.Context, tool string, args any) (hookReply, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return hookReply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/v1/tools/"+tool, bytes.NewReader(body))
	if err != nil {
		return hookReply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if h.key != "" {
		req.Header.Set("Authorization", "Bearer "+h.key)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return hookReply{}, err
	}
	defer resp.Body.Close()
	var r hookReply
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return hookReply{}, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return hookReply{}, fmt.Errorf("HTTP %d, not a Countersign answer", resp.StatusCode)
	}
	r.status = resp.StatusCode
	return r, nil
}

// writeHookOutput prints d in the shape Claude Code documents for event.
// PreToolUse: hookSpecificOutput.permissionDecision allow|deny|ask with
// permissionDecisionReason. PermissionRequest: hookSpecificOutput.decision
// with behavior allow|deny (and message); its "ask" prints no decision, so
// Claude Code shows its own permission dialog.
func writeHookOutput(w io.Writer, event string, d hookDecision) error {
	var out map[string]any
	if event == "PermissionRequest" {
		if d.Decision == "ask" {
			return nil
		}
		dec := map[string]any{"behavior": d.Decision}
		if d.Decision == "deny" {
			dec["message"] = d.Reason
		}
		out = map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": event, "decision": dec}}
	} else {
		out = map[string]any{"hookSpecificOutput": map[string]any{
			"hookEventName":            event,
			"permissionDecision":       d.Decision,
			"permissionDecisionReason": d.Reason,
		}}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
