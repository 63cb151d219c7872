package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
)

const actionsConfig = `
tools:
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
    approvers: {roles: [member, admin]}
    quorum: 1
    timeout: 30m
  - name: rollback_production
    category: destructive
    quorum: 2
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
  - name: read_logs
    category: read-only
  - name: create_server
    category: mutating
    schema: {type: object, required: [region, size]}
  - name: exec
    category: mutating
    commands:
      - {command: kubectl get, category: read-only}
      - {command: kubectl delete, category: destructive}
callbacks:
  secret_env: CS_CALLBACK_SECRET
  allowed_hosts: [127.0.0.1]
`

// actSecret is the callback secret of the e2e tests, in the Standard
// Webhooks form.
var actSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("countersign-e2e-callback-secret!"))

// actReceiver is an agent's callback endpoint on loopback: it verifies every
// delivery with actiontools.Verify and answers status.
type actReceiver struct {
	secret []byte
	mu     sync.Mutex
	status int
	tries  []string // webhook-id of every attempt
	got    []actiontools.Payload
	bad    int
}

// actConfig is actionsConfig allowing callbacks to srv's host and port.
func actConfig(srv *httptest.Server) string {
	return strings.Replace(actionsConfig, "allowed_hosts: [127.0.0.1]", "allowed_hosts: [\""+srv.Listener.Addr().String()+"\"]", 1)
}

// RotateCallbackSecret runs `countersign keys rotate-callback-secret` (the
// server must be stopped) and returns the secret it printed, decoded.
func (e *testEnv) RotateCallbackSecret(name string) []byte {
	e.t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"keys", "rotate-callback-secret", "--config", e.cfg, "--name", name}, e.getenv, strings.NewReader(""), &out, &errb); err != nil {
		e.t.Fatalf("keys rotate-callback-secret %s: %v (%s)", name, err, errb.String())
	}
	secret, err := actiontools.ParseSecret(strings.TrimSpace(out.String()))
	if err != nil || !strings.HasPrefix(out.String(), "whsec_") {
		e.t.Fatalf("keys rotate-callback-secret printed %q: %v, want a whsec_ secret", out.String(), err)
	}
	return secret
}

func newActReceiver(t *testing.T, status int) (*actReceiver, *httptest.Server) {
	secret, err := actiontools.ParseSecret(actSecret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &actReceiver{secret: secret, status: status}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv
}

func (rc *actReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.tries = append(rc.tries, r.Header.Get(actiontools.HeaderID))
	if err := actiontools.Verify(rc.secret, r.Header, body, time.Now(), 0); err != nil {
		rc.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if rc.status != http.StatusOK {
		w.WriteHeader(rc.status)
		return
	}
	var p actiontools.Payload
	if json.Unmarshal(body, &p) == nil {
		rc.got = append(rc.got, p)
	}
	w.WriteHeader(http.StatusOK)
}

func (rc *actReceiver) state() (tries []string, got []actiontools.Payload, bad int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.tries...), append([]actiontools.Payload(nil), rc.got...), rc.bad
}

func (rc *actReceiver) setStatus(s int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.status = s
}

// actWait polls cond until it holds; it waits for an asynchronous event
// (a callback, a restart) and asserts nothing about speed.
func actWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (30s)", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// actAgain returns a fresh handle on the same config and store: a
// testEnv's log reader belongs to one run of the server.
func actAgain(e *testEnv) *testEnv {
	n := &testEnv{t: e.t, dir: e.dir, cfg: e.cfg, env: e.env}
	e.t.Cleanup(n.Stop)
	return n
}

// actPost calls a tool without touching t, for use from a goroutine.
func actPost(url, key, tool string, args any) (int, map[string]any, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url+"/v1/tools/"+tool, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Data map[string]any `json:"data"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s: %s", err, raw)
	}
	return resp.StatusCode, out.Data, nil
}

var actConfirmedBy = regexp.MustCompile(`^bob \[prin_[0-9a-f]+\]$`)

func actDelete(callback string) map[string]any {
	args := map[string]any{
		"tool":              "delete_database",
		"arguments":         map[string]any{"db_name": "prod"},
		"summary":           "I will delete the prod database. The action is irreversible.",
		"category":          "destructive",
		"requested_effects": []string{"drop database prod"},
		"dry_run":           "DROP DATABASE prod: 42 tables, 1.2 GB",
	}
	if callback != "" {
		args["callback_url"] = callback
	}
	return args
}

// TestE2EDestructiveActionApprovedByAMember is the seed's trace end to end:
// a plan, a person's approval through approve_action, confirmed_by on a
// long poll and on a signed callback.
func TestE2EDestructiveActionApprovedByAMember(t *testing.T) {
	t.Parallel()
	rc, srv := newActReceiver(t, http.StatusOK)
	e := newTestEnv(t, actConfig(srv))
	e.env["CS_CALLBACK_SECRET"] = actSecret
	agent := e.CreateKey("deploy-bot", "agent")
	rc.secret = e.RotateCallbackSecret("deploy-bot") // its own: callbacks are signed with it
	alice := e.CreateKey("alice", "member")
	bob := e.CreateKey("bob", "member")
	e.Start()

	r := e.MustOK(agent, "confirm_action", actDelete(srv.URL+"/agent/callback"))
	id, _ := r.Data["request_id"].(string)
	if r.Data["status"] != "pending" || r.Data["mechanics"] != "dry_run_confirm" || r.Data["confirmed_by"] != "" {
		t.Fatalf("confirm_action: %s, want status pending, mechanics dry_run_confirm, confirmed_by empty", r)
	}

	type polled struct {
		status int
		data   map[string]any
		err    error
	}
	poll := make(chan polled, 1)
	go func() {
		s, d, err := actPost(e.URL, agent, "action_status", map[string]any{"request_id": id, "wait_seconds": 60})
		poll <- polled{s, d, err}
	}()

	// The agent's own key cannot approve; a member who requested cannot
	// approve their own request.
	if a := e.Call(agent, "approve_action", map[string]any{"request_id": id}); a.Status != http.StatusForbidden || !strings.Contains(a.Error, "Access denied") {
		t.Fatalf("agent approves: %s, want %d saying %q", a, http.StatusForbidden, "Access denied")
	}
	own := e.MustOK(alice, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}})
	if a := e.Call(alice, "approve_action", map[string]any{"request_id": own.Data["request_id"]}); a.Status != http.StatusForbidden || !strings.Contains(a.Error, "own requester") {
		t.Fatalf("requester approves: %s, want %d saying %q", a, http.StatusForbidden, "own requester")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": id}); st.Data["status"] != "pending" {
		t.Fatalf("refused approvals changed the request: status = %v, want pending: %s", st.Data["status"], st)
	}

	select {
	case p := <-poll:
		t.Fatalf("the long poll answered while the request was pending: %v %v, want it still waiting", p.data, p.err)
	default:
	}
	ok := e.MustOK(bob, "approve_action", map[string]any{"request_id": id})
	cb, _ := ok.Data["confirmed_by"].(string)
	if ok.Data["status"] != "approved" || !actConfirmedBy.MatchString(cb) || ok.Data["args_sha256"] != r.Data["args_sha256"] {
		t.Fatalf("approve_action: %s, want approved, confirmed_by matching %s, args_sha256 %v", ok, actConfirmedBy, r.Data["args_sha256"])
	}

	p := <-poll
	if p.err != nil || p.status != http.StatusOK || p.data["status"] != "approved" || p.data["confirmed_by"] != cb {
		t.Fatalf("long poll: %d %v %v, want %d, approved, confirmed_by %q", p.status, p.data, p.err, http.StatusOK, cb)
	}

	actWait(t, "the signed callback", func() bool { _, got, _ := rc.state(); return len(got) == 1 })
	tries, got, bad := rc.state()
	if bad != 0 || tries[0] != actiontools.CallbackID(id, bot.EventDecided) {
		t.Fatalf("callback: %d bad signatures, ids %v, want 0 bad, first id %s", bad, tries, actiontools.CallbackID(id, bot.EventDecided))
	}
	if d := got[0].Data; got[0].Type != "action.decided" || d["request_id"] != id || d["status"] != "approved" || d["confirmed_by"] != cb {
		t.Fatalf("callback payload: %+v, want action.decided of %s, approved, confirmed_by %q", got[0], id, cb)
	}

	// A later decision gets the recorded outcome.
	if late := e.Call(alice, "deny_action", map[string]any{"request_id": id, "reason": "changed my mind"}); late.Status != http.StatusConflict || !strings.Contains(late.Error, "already approved by bob") || late.Data["confirmed_by"] != cb {
		t.Fatalf("late deny: %s, want %d saying %q, confirmed_by %q", late, http.StatusConflict, "already approved by bob", cb)
	}
}

// TestE2EGateRules covers the rest of the gate over HTTP.
func TestE2EGateRules(t *testing.T) {
	t.Parallel()
	_, srv := newActReceiver(t, http.StatusOK)
	e := newTestEnv(t, actConfig(srv))
	e.env["CS_CALLBACK_SECRET"] = actSecret
	agent := e.CreateKey("deploy-bot", "agent")
	alice := e.CreateKey("alice", "member")
	bob := e.CreateKey("bob", "member")
	carol := e.CreateKey("carol", "member")
	e.Start()

	// Quorum 2 needs two different members.
	rb := map[string]any{"tool": "rollback_production", "arguments": map[string]any{"to": "v41"}, "dry_run": "redeploy v41 on 12 hosts"}
	q := e.MustOK(agent, "confirm_action", rb)
	qid := q.Data["request_id"]
	if a := e.MustOK(alice, "approve_action", map[string]any{"request_id": qid}); a.Data["status"] != "pending" || a.Data["tally"] != "1 of 2 approvals: alice" {
		t.Fatalf("first of two: status = %v, tally = %v, want pending, %q: %s", a.Data["status"], a.Data["tally"], "1 of 2 approvals: alice", a)
	}
	if a := e.MustOK(alice, "approve_action", map[string]any{"request_id": qid}); a.Data["status"] != "pending" {
		t.Fatalf("the same member twice: status = %v, want pending: %s", a.Data["status"], a)
	}
	if a := e.MustOK(bob, "approve_action", map[string]any{"request_id": qid}); a.Data["status"] != "approved" || !strings.Contains(a.Data["confirmed_by"].(string), "alice [") || !strings.Contains(a.Data["confirmed_by"].(string), "bob [") {
		t.Fatalf("second of two: %s, want approved, confirmed by alice and bob", a)
	}

	// One deny denies, and the reason reaches the agent.
	d := e.MustOK(agent, "confirm_action", rb)
	e.MustOK(alice, "approve_action", map[string]any{"request_id": d.Data["request_id"]})
	e.MustOK(carol, "deny_action", map[string]any{"request_id": d.Data["request_id"], "reason": "v41 has the billing bug"})
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": d.Data["request_id"]}); st.Data["status"] != "denied" || st.Data["reason"] != "v41 has the billing bug" || st.Data["confirmed_by"] != "" {
		t.Fatalf("after a deny: %s, want denied with the reason %q, confirmed_by empty", st, "v41 has the billing bug")
	}

	// Read-only is auto; an undeclared tool is confirm.
	if r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "read_logs", "arguments": map[string]any{"service": "web"}}); r.Data["status"] != "approved" || r.Data["mechanics"] != "auto" {
		t.Fatalf("read-only: status = %v, mechanics = %v, want approved, auto: %s", r.Data["status"], r.Data["mechanics"], r)
	}
	if r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "drop_everything", "category": "read-only"}); r.Data["status"] != "pending" || r.Data["mechanics"] != "confirm" {
		t.Fatalf("undeclared: status = %v, mechanics = %v, want pending, confirm: %s", r.Data["status"], r.Data["mechanics"], r)
	}
	// An exec command not on the allowlist is refused outright.
	if r := e.Call(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": "rm -rf /"}}); r.Status != http.StatusForbidden || !strings.Contains(r.Error, "not on the command allowlist of exec") {
		t.Fatalf("not allowlisted: %s, want %d saying %q", r, http.StatusForbidden, "not on the command allowlist of exec")
	}
	if r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": []string{"kubectl", "get", "pods"}}}); r.Data["mechanics"] != "auto" {
		t.Fatalf("kubectl get: mechanics = %v, want auto: %s", r.Data["mechanics"], r)
	}
	// Missing arguments: REQUIRES_CLARIFICATION, no request.
	if r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "create_server", "arguments": map[string]any{}}); r.Text != "REQUIRES_CLARIFICATION: Missing required parameters: region, size" || r.Data["status"] != "requires_clarification" {
		t.Fatalf("clarification: %s, want status requires_clarification, text %q", r, "REQUIRES_CLARIFICATION: Missing required parameters: region, size")
	}
	// A destructive request without a plan: 400 naming dry_run.
	noPlan := actDelete("")
	delete(noPlan, "dry_run")
	if r := e.Call(agent, "confirm_action", noPlan); r.Status != http.StatusBadRequest || r.Field != "dry_run" {
		t.Fatalf("no plan: status = %d, field = %q, want %d on %q: %s", r.Status, r.Field, http.StatusBadRequest, "dry_run", r)
	}
	// Callbacks only to allowed hosts.
	if r := e.Call(agent, "confirm_action", actDelete("http://169.254.169.254/latest")); r.Status != http.StatusBadRequest || r.Field != "callback_url" {
		t.Fatalf("callback host: status = %d, field = %q, want %d on %q: %s", r.Status, r.Field, http.StatusBadRequest, "callback_url", r)
	}
	// action_id: the same body is the same request; another body is a 409.
	idem := actDelete(srv.URL)
	idem["action_id"] = "delete_db_prod"
	first := e.MustOK(agent, "confirm_action", idem)
	if again := e.MustOK(agent, "confirm_action", idem); again.Data["request_id"] != first.Data["request_id"] {
		t.Fatalf("same action_id and body: %s vs %s, want the same request_id", again, first)
	}
	idem["arguments"] = map[string]any{"db_name": "staging"}
	if r := e.Call(agent, "confirm_action", idem); r.Status != http.StatusConflict || r.Data["request_id"] != first.Data["request_id"] {
		t.Fatalf("same action_id, other body: %s, want %d naming request %v", r, http.StatusConflict, first.Data["request_id"])
	}
	// Headless: denied by automatic policy.
	h := actDelete("")
	h["headless"] = true
	if r := e.MustOK(agent, "confirm_action", h); r.Data["status"] != "denied" || r.Data["reason"] != "denied by automatic policy: destructive action requires explicit human confirmation" {
		t.Fatalf("headless: %s, want denied with the reason %q", r, "denied by automatic policy: destructive action requires explicit human confirmation")
	}
}

// TestE2ERestartKeepsRequestsAndCallbacks stops the server while a callback
// receiver fails, and starts it again once the receiver answers: pending
// requests and their deadlines survive, and the callback is delivered once.
func TestE2ERestartKeepsRequestsAndCallbacks(t *testing.T) {
	t.Parallel()
	rc, srv := newActReceiver(t, http.StatusInternalServerError)
	e := newTestEnv(t, actConfig(srv))
	e.env["CS_CALLBACK_SECRET"] = actSecret
	agent := e.CreateKey("deploy-bot", "agent")
	rc.secret = e.RotateCallbackSecret("deploy-bot") // its own: callbacks are signed with it
	bob := e.CreateKey("bob", "member")
	e.Start()

	pending := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}})
	decided := e.MustOK(agent, "confirm_action", actDelete(srv.URL+"/cb"))
	e.MustOK(bob, "approve_action", map[string]any{"request_id": decided.Data["request_id"]})
	actWait(t, "a failed delivery attempt", func() bool { tries, _, _ := rc.state(); return len(tries) >= 1 })
	e.Stop()

	rc.setStatus(http.StatusOK)
	e = actAgain(e)
	e.Start()
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": pending.Data["request_id"]})
	if st.Data["status"] != "pending" || st.Data["expires_at"] != pending.Data["expires_at"] || st.Data["item_id"] != pending.Data["item_id"] {
		t.Fatalf("after restart: %s\nbefore: %s\nwant it pending with the same expires_at and item_id", st, pending)
	}
	actWait(t, "the callback after the restart", func() bool { _, got, _ := rc.state(); return len(got) == 1 })
	// The receiver has it; wait until the server has recorded the delivery
	// (the outbox gauge), so the stop below is not racing the bookkeeping.
	actWait(t, "the delivery recorded", func() bool {
		resp, err := http.Get(e.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), `countersign_outbox_depth{sink="callback"} 0`)
	})
	e.Stop()

	tries, got, bad := rc.state()
	if len(got) != 1 || bad != 0 || got[0].Data["request_id"] != decided.Data["request_id"] {
		t.Fatalf("delivered %d (bad %d): %+v, want 1 callback of %v, no bad signatures", len(got), bad, got, decided.Data["request_id"])
	}
	for _, id := range tries {
		if id != tries[0] {
			t.Fatalf("webhook-id changed across attempts: %v, want the same on each", tries)
		}
	}
	// Nothing is left in the callback outbox, so nothing is sent twice.
	db := e.openTestStore()
	defer db.Close()
	b, err := bot.New(bot.Options{Store: db, SigningKey: ed25519.NewKeyFromSeed(make([]byte, 32))})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.Outbox().Depth(context.Background(), actiontools.CallbackSink); err != nil || n != 0 {
		t.Fatalf("callback outbox depth %d (%v), want 0", n, err)
	}
}

// TestE2ESweeperTimesOutOnSchedule runs the cron sweeper of a real server:
// an unanswered request is denied by automatic policy, and a long-polling
// agent hears it.
func TestE2ESweeperTimesOutOnSchedule(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `
tools:
  - name: restart_service
    category: mutating
    timeout: 1s
sweep:
  schedule: "@every 1s"
`)
	agent := e.CreateKey("deploy-bot", "agent")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}})
	var st toolResponse
	actWait(t, "the sweeper", func() bool {
		st = e.MustOK(agent, "action_status", map[string]any{"request_id": r.Data["request_id"], "wait_seconds": 5})
		return st.Data["status"] != "pending"
	})
	if st.Data["status"] != "expired" || st.Data["reason"] != "denied by automatic policy: mutating action requires explicit human confirmation" || st.Data["confirmed_by"] != "" {
		t.Fatalf("after the timeout: %s, want expired with the reason %q, confirmed_by empty", st, "denied by automatic policy: mutating action requires explicit human confirmation")
	}
}
