package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

const hookConfig = `
tools:
  - name: exec
    category: mutating
    approvers: {roles: [member, admin]}
    commands:
      - {command: kubectl get, category: read-only, flags: [-n, --namespace]}
      - {command: kubectl rollout restart, category: mutating}
hooks:
  claude_code:
    wait: 30s
`

// hookOut is Claude Code's PreToolUse decision JSON.
type hookOut struct {
	Specific struct {
		Event    string `json:"hookEventName"`
		Decision string `json:"permissionDecision"`
		Reason   string `json:"permissionDecisionReason"`
		// PermissionRequest's decision.
		Behavior struct {
			Behavior string `json:"behavior"`
			Message  string `json:"message"`
		} `json:"decision"`
	} `json:"hookSpecificOutput"`
}

// runHook runs `countersign hook claude-code` on a recorded payload, as
// Claude Code would, and returns its stdout. stderr receives its log.
func runHook(t *testing.T, e *testEnv, url, key, payload string, stderr *syncBuffer) (string, error) {
	t.Helper()
	in, err := os.ReadFile("testdata/claude-code/" + payload)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	env := func(k string) string {
		if k == hookKeyEnv {
			return key
		}
		return e.getenv(k)
	}
	err = run(context.Background(), []string{"hook", "claude-code", "--config", e.cfg, "--url", url}, env, bytes.NewReader(in), &out, stderr)
	return out.String(), err
}

func parseHookOut(t *testing.T, s string) hookOut {
	t.Helper()
	var o hookOut
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		t.Fatalf("hook output is not JSON: %q", s)
	}
	return o
}

var hookWaitingRE = regexp.MustCompile(`waiting up to \S+ for a person to decide (req_\w+)`)

// waitForRequest reads the request id the hook logs while it waits.
func waitForRequest(t *testing.T, log *syncBuffer, done <-chan struct{}) string {
	t.Helper()
	for {
		if m := hookWaitingRE.FindStringSubmatch(log.String()); m != nil {
			return m[1]
		}
		select {
		case <-done:
			t.Fatalf("the hook ended without waiting on a request: %s", log.String())
		default:
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClaudeCodeHookAllowsDeniesAndAsks(t *testing.T) {
	e := newTestEnv(t, hookConfig)
	agent := e.CreateKey("claude-code", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()

	t.Run("read-only tool is allowed without asking", func(t *testing.T) {
		var log syncBuffer
		out, err := runHook(t, e, e.URL, agent, "pretooluse_read.json", &log)
		o := parseHookOut(t, out)
		if err != nil || o.Specific.Event != "PreToolUse" || o.Specific.Decision != "allow" || !strings.Contains(o.Specific.Reason, "read-only") {
			t.Fatalf("Read: %v %q", err, out)
		}
	})

	t.Run("Bash on the allowlist as read-only is allowed by policy", func(t *testing.T) {
		var log syncBuffer
		out, err := runHook(t, e, e.URL, agent, "pretooluse_bash_readonly.json", &log)
		o := parseHookOut(t, out)
		if err != nil || o.Specific.Decision != "allow" || !strings.Contains(o.Specific.Reason, "read-only") || !strings.Contains(o.Specific.Reason, "req_") {
			t.Fatalf("kubectl get: %v %q", err, out)
		}
	})

	t.Run("Bash off the allowlist is denied outright", func(t *testing.T) {
		var log syncBuffer
		out, err := runHook(t, e, e.URL, agent, "pretooluse_bash_offlist.json", &log)
		o := parseHookOut(t, out)
		if err != nil || o.Specific.Decision != "deny" {
			t.Fatalf("terraform destroy: %v %q", err, out)
		}
	})

	t.Run("Bash approved by a person is allowed", func(t *testing.T) {
		var log syncBuffer
		type res struct {
			out string
			err error
		}
		got, done := make(chan res, 1), make(chan struct{})
		go func() {
			out, err := runHook(t, e, e.URL, agent, "pretooluse_bash.json", &log)
			got <- res{out, err}
			close(done)
		}()
		id := waitForRequest(t, &log, done)
		st := e.MustOK(agent, "action_status", map[string]any{"request_id": id})
		if st.Data["status"] != "pending" || st.Data["tool"] != "exec" || st.Data["command"] != "kubectl rollout restart" {
			t.Fatalf("the hook's request: %s", st)
		}
		e.MustOK(alice, "approve_action", map[string]any{"request_id": id})
		r := <-got
		o := parseHookOut(t, r.out)
		if r.err != nil || o.Specific.Decision != "allow" || !strings.Contains(o.Specific.Reason, "approved by alice") || !strings.Contains(o.Specific.Reason, id) {
			t.Fatalf("approved Bash: %v %q", r.err, r.out)
		}
		if strings.Contains(r.out+log.String(), agent) {
			t.Fatal("the hook printed its key")
		}
	})

	t.Run("Write denied by a person is denied with the reason", func(t *testing.T) {
		var log syncBuffer
		got, done := make(chan string, 1), make(chan struct{})
		go func() {
			out, _ := runHook(t, e, e.URL, agent, "pretooluse_write.json", &log)
			got <- out
			close(done)
		}()
		id := waitForRequest(t, &log, done)
		if st := e.MustOK(agent, "action_status", map[string]any{"request_id": id}); st.Data["tool"] != "Write" {
			t.Fatalf("the hook's request: %s", st)
		}
		e.MustOK(alice, "deny_action", map[string]any{"request_id": id, "reason": "not the live key file"})
		o := parseHookOut(t, <-got)
		if o.Specific.Decision != "deny" || !strings.Contains(o.Specific.Reason, "not the live key file") {
			t.Fatalf("denied Write: %+v", o)
		}
	})

	t.Run("PermissionRequest approved answers decision.behavior allow", func(t *testing.T) {
		var log syncBuffer
		got, done := make(chan string, 1), make(chan struct{})
		go func() {
			out, _ := runHook(t, e, e.URL, agent, "permissionrequest_bash.json", &log)
			got <- out
			close(done)
		}()
		id := waitForRequest(t, &log, done)
		e.MustOK(alice, "approve_action", map[string]any{"request_id": id})
		o := parseHookOut(t, <-got)
		if o.Specific.Event != "PermissionRequest" || o.Specific.Behavior.Behavior != "allow" || o.Specific.Decision != "" {
			t.Fatalf("PermissionRequest: %+v", o)
		}
	})

	t.Run("a bad key asks the person, never allows", func(t *testing.T) {
		var log syncBuffer
		out, err := runHook(t, e, e.URL, "cs_sk_not_a_key", "pretooluse_bash.json", &log)
		o := parseHookOut(t, out)
		if err != nil || o.Specific.Decision != "ask" || strings.Contains(out, "cs_sk_not_a_key") {
			t.Fatalf("bad key: %v %q", err, out)
		}
	})
}

// With Countersign down, the hook hands the call to the person in Claude
// Code ("ask"); it never allows on an error.
func TestClaudeCodeHookAsksWhenCountersignIsUnreachable(t *testing.T) {
	e := newTestEnv(t, hookConfig)
	// A loopback port that was free a moment ago: nothing listens on it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	for _, p := range []string{"pretooluse_bash.json", "pretooluse_write.json"} {
		var log syncBuffer
		out, err := runHook(t, e, dead, "cs_sk_whatever", p, &log)
		o := parseHookOut(t, out)
		if err != nil || o.Specific.Event != "PreToolUse" || o.Specific.Decision != "ask" || !strings.Contains(o.Specific.Reason, "unreachable") {
			t.Fatalf("%s with the server down: %v %q", p, err, out)
		}
	}
	// Read-only tools need no server.
	var log syncBuffer
	out, _ := runHook(t, e, dead, "", "pretooluse_read.json", &log)
	if o := parseHookOut(t, out); o.Specific.Decision != "allow" {
		t.Fatalf("Read with the server down: %q", out)
	}
	// Input that is not a hook event: ask.
	var buf bytes.Buffer
	if err := run(context.Background(), []string{"hook", "claude-code", "--config", e.cfg, "--url", dead}, e.getenv, strings.NewReader("not json"), &buf, &log); err != nil {
		t.Fatal(err)
	}
	if o := parseHookOut(t, buf.String()); o.Specific.Decision != "ask" {
		t.Fatalf("bad input: %q", buf.String())
	}
}

// When nobody decides within hooks.claude_code.wait, the hook asks the
// person in Claude Code, and the request stays pending in Countersign.
func TestClaudeCodeHookAsksWhenTheWaitRunsOut(t *testing.T) {
	e := newTestEnv(t, strings.Replace(hookConfig, "wait: 30s", "wait: 1s", 1))
	agent := e.CreateKey("claude-code", "agent")
	e.Start()
	var log syncBuffer
	out, err := runHook(t, e, e.URL, agent, "pretooluse_bash.json", &log)
	o := parseHookOut(t, out)
	m := hookWaitingRE.FindStringSubmatch(log.String())
	if err != nil || m == nil || o.Specific.Decision != "ask" || !strings.Contains(o.Specific.Reason, m[1]+" is still pending") {
		t.Fatalf("wait ran out: %v %q %s", err, out, log.String())
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": m[1]}); st.Data["status"] != "pending" {
		t.Fatalf("after the hook gave up: %s", st)
	}
}
