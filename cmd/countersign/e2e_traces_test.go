package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/internal/otlptest"
)

// signedSlackPost posts form to path signed with secret and returns the
// status and the answer's X-Request-ID.
func signedSlackPost(t *testing.T, base, path string, form url.Values, secret string) (int, string) {
	t.Helper()
	body := form.Encode()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Request-ID")
}

// spanTree indexes received spans.
type spanTree struct {
	t     *testing.T
	spans []otlptest.Span
}

// one returns the one span that satisfies match, described by what.
func (s spanTree) one(what string, match func(otlptest.Span) bool) otlptest.Span {
	s.t.Helper()
	var found []otlptest.Span
	for _, sp := range s.spans {
		if match(sp) {
			found = append(found, sp)
		}
	}
	if len(found) != 1 {
		s.t.Fatalf("%d spans are %s, want 1; received:\n%s", len(found), what, s)
	}
	return found[0]
}

func (s spanTree) String() string {
	var b strings.Builder
	for _, sp := range s.spans {
		fmt.Fprintf(&b, "  %s trace=%s span=%s parent=%s kind=%s links=%v attrs=%v\n", sp.Name, sp.TraceID, sp.SpanID, sp.ParentID, sp.Kind, sp.Links, sp.Attrs)
	}
	return b.String()
}

// wantAttrs fails for every attribute of want that span lacks or holds
// with another value.
func wantSpanAttrs(t *testing.T, sp otlptest.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if sp.Attrs[k] != v {
			t.Errorf("span %q: %s = %q, want %q (attributes %v)", sp.Name, k, sp.Attrs[k], v, sp.Attrs)
		}
	}
}

// TestTracesOfASlackClickEndToEnd: with OTEL_EXPORTER_OTLP_ENDPOINT set,
// a real Slack click through the real server and the real slack-go client
// (against the fake Slack) exports, to an OTLP/HTTP receiver, the span tree
// from the HTTP request to the chat.update call: POST /slack/interactions
// -> chat.decide -> execute_tool confirm_change -> store.update, and the
// card's update as a delivery of its own (outbox.deliver slack, linked to
// the decision's tool call) -> POST /api/chat.update. No span holds the
// Slack token, the signing secret, the agent's API key, the fact's value
// or the person; the log line of the decision's tool call names its trace;
// the spans are flushed when the server stops.
func TestTracesOfASlackClickEndToEnd(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "http"))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e-trace-token", e2eSlackSecret
	e.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rcv.URL()
	e.env["OTEL_SERVICE_NAME"] = "countersign-e2e"
	agent := e.CreateKey("intake", "agent")
	e.Start()

	const value = "DNR-e2e-secret-value"
	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "full code"}) // the first value applies
	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": value, "text": "Make her " + value})
	waitFor(t, "the proposal to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(post.Form.Get("blocks")), &blocks); err != nil {
		t.Fatal(err)
	}
	var itemID, button string
	for _, b := range blocks {
		if id, ok := strings.CutPrefix(fmt.Sprint(b["block_id"]), "countersign:"); ok && b["type"] == "actions" {
			itemID = id
			for _, el := range b["elements"].([]any) {
				if m := el.(map[string]any); m["action_id"] == "countersign.approve" {
					button = m["value"].(string)
				}
			}
		}
	}
	if itemID == "" || button == "" {
		t.Fatalf("no Approve button:\n%s", post.Form.Get("blocks"))
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": "t-trace",
		"user": map[string]any{"id": "U0123ABC"}, "team": map[string]any{"id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0DEFAULT", "message_ts": post.TS},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + itemID, "value": button, "action_ts": "1.1"}},
	})
	code, rid := signedSlackPost(t, e.URL, "/slack/interactions", url.Values{"payload": {string(payload)}}, e2eSlackSecret)
	if code != http.StatusOK || rid == "" {
		t.Fatalf("click answered %d with request id %q, want %d with a request id", code, rid, http.StatusOK)
	}
	waitFor(t, "the card to be updated", func() bool { return len(f.Calls("chat.update")) == 1 })
	// Slack has the update; wait until the server has recorded the
	// delivery (the outbox gauge), or the stop below cancels it in flight.
	waitFor(t, "the delivery recorded", func() bool {
		resp, err := http.Get(e.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), `countersign_outbox_depth{sink="slack"} 0`)
	})
	e.Stop() // the batched spans are exported on the way out
	if p := rcv.Problems(); len(p) > 0 {
		t.Fatalf("the receiver refused the exporter's requests: %v", p)
	}
	tree := spanTree{t: t, spans: rcv.Spans()}

	// The click's trace: the HTTP request, the decision on the worker, the
	// tool call, its transaction.
	req := tree.one("the click's server span", func(s otlptest.Span) bool {
		return s.Name == "POST /slack/interactions" && s.Attrs["countersign.request_id"] == rid
	})
	wantSpanAttrs(t, req, map[string]string{"http.request.method": "POST", "http.route": "/slack/interactions", "http.response.status_code": "200"})
	if req.Kind != "server" || req.ParentID != "" || req.Resource["service.name"] != "countersign-e2e" {
		t.Errorf("the click's span: kind %s, parent %q, resource %v; want a root server span of countersign-e2e", req.Kind, req.ParentID, req.Resource)
	}
	decide := tree.one("the click's decision", func(s otlptest.Span) bool { return s.Name == "chat.decide" && s.ParentID == req.SpanID })
	wantSpanAttrs(t, decide, map[string]string{"countersign.surface": "slack", "countersign.item_id": itemID, "countersign.verb": "approve", "countersign.outcome": "decided", "countersign.request_id": rid})
	call := tree.one("the decision's tool call", func(s otlptest.Span) bool {
		return s.ParentID == decide.SpanID && strings.HasPrefix(s.Name, "execute_tool ")
	})
	wantSpanAttrs(t, call, map[string]string{"gen_ai.tool.name": "confirm_change", "countersign.surface": "slack", "countersign.request_id": rid, "countersign.item_id": itemID, "countersign.outcome": "ok"})
	if call.Name != "execute_tool confirm_change" || call.TraceID != req.TraceID {
		t.Errorf("the tool call's span %q in trace %s, want execute_tool confirm_change in the click's %s", call.Name, call.TraceID, req.TraceID)
	}
	commit := tree.one("the tool call's transaction", func(s otlptest.Span) bool { return s.ParentID == call.SpanID && s.Name == "store.update" })
	engine := "bbolt"
	if os.Getenv(testStoreEnv) == config.EnginePostgres {
		engine = "postgresql"
	}
	wantSpanAttrs(t, commit, map[string]string{"db.system.name": engine})
	// The click is that one transaction: its delivery's dedupe commits
	// with the decision (bot.Decide), so the decision opens none of its own.
	for _, sp := range tree.spans {
		if sp.ParentID == decide.SpanID && strings.HasPrefix(sp.Name, "store.") {
			t.Errorf("the click's decision opened %s of its own (span %s), want its one transaction under the tool call", sp.Name, sp.SpanID)
		}
	}

	// The card's update: a delivery of its own, linked to the tool call
	// that queued it, down to Slack's chat.update.
	deliver := tree.one("the decided event's delivery", func(s otlptest.Span) bool {
		return s.Name == "outbox.deliver slack" && s.Attrs["countersign.event"] == "decided"
	})
	wantSpanAttrs(t, deliver, map[string]string{"countersign.sink": "slack", "countersign.item_id": itemID, "countersign.attempt": "1", "countersign.outcome": "delivered"})
	if deliver.ParentID != "" || deliver.TraceID == req.TraceID || deliver.Kind != "consumer" {
		t.Errorf("the delivery: parent %q, trace %s, kind %s; want a consumer root span in a trace of its own", deliver.ParentID, deliver.TraceID, deliver.Kind)
	}
	if len(deliver.Links) != 1 || deliver.Links[0] != (otlptest.Link{TraceID: call.TraceID, SpanID: call.SpanID}) {
		t.Errorf("the delivery's links %v, want one to the tool call %s/%s", deliver.Links, call.TraceID, call.SpanID)
	}
	// The fake serves the Web API at its root (Slack's own is /api/).
	api, _ := url.Parse(f.srv.GetAPIURL())
	update := tree.one("the chat.update call", func(s otlptest.Span) bool { return s.ParentID == deliver.SpanID && s.Kind == "client" })
	if update.Name != "POST "+api.Path+"chat.update" {
		t.Errorf("the delivery's client span is %q, want POST %schat.update", update.Name, api.Path)
	}
	wantSpanAttrs(t, update, map[string]string{"url.template": api.Path + "chat.update", "http.response.status_code": "200", "countersign.platform": "slack", "server.address": "127.0.0.1"})

	// The agent's call that proposed the change, and the card's post.
	rem := tree.one("the proposing remember call", func(s otlptest.Span) bool {
		return s.Name == "execute_tool remember" && s.Attrs["countersign.item_id"] == itemID
	})
	if api := tree.one("the remember request", func(s otlptest.Span) bool { return s.SpanID == rem.ParentID }); api.Name != "POST /v1/tools/{name}" {
		t.Errorf("remember's parent is %q, want the POST /v1/tools/{name} server span", api.Name)
	}
	created := tree.one("the created event's delivery", func(s otlptest.Span) bool {
		return s.Name == "outbox.deliver slack" && s.Attrs["countersign.event"] == "created"
	})
	tree.one("the chat.postMessage call", func(s otlptest.Span) bool {
		return s.ParentID == created.SpanID && s.Name == "POST "+api.Path+"chat.postMessage"
	})
	if len(created.Links) != 1 || created.Links[0].SpanID != rem.SpanID {
		t.Errorf("the created event's delivery links %v, want the remember call %s", created.Links, rem.SpanID)
	}

	// Nothing secret, nothing personal.
	for _, secret := range []string{"xoxb-e2e-trace-token", e2eSlackSecret, agent, strings.TrimPrefix(agent, "cs_sk_"), value, "dr_smith", "U0123ABC", "t-trace"} {
		for _, x := range rcv.Texts() {
			if strings.Contains(x, secret) {
				t.Errorf("a span holds %q: %q", secret, x)
			}
		}
	}

	// The tool call's log line names its trace and span.
	want := "trace_id=" + call.TraceID + " span_id=" + call.SpanID
	found := false
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "msg=\"tool call\"") && strings.Contains(line, "tool=confirm_change") {
			found = found || strings.Contains(line, want)
		}
	}
	if !found {
		t.Errorf("no confirm_change tool call log line with %q:\n%s", want, e.logs.String())
	}
}

// TestTracesOffWithoutTheEnvironment: with no OTEL_* variable the server
// exports nothing and logs no trace ids; with a variable it cannot honour
// it refuses to start, naming it.
func TestTracesOffWithoutTheEnvironment(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	key := e.CreateKey("intake", "agent")
	e.Start()
	e.MustOK(key, "check_before_act", map[string]any{"subject": "allergy"})
	e.Stop()
	if logs := e.logs.String(); strings.Contains(logs, "trace_id=") || strings.Contains(logs, "traces:") {
		t.Errorf("tracing off, but the log mentions traces:\n%s", logs)
	}
	e.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "collector:4318"
	var errb strings.Builder
	err := run(t.Context(), []string{"serve", "--config", e.cfg}, e.getenv, strings.NewReader(""), &errb, &errb)
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT") || !strings.Contains(err.Error(), "http://localhost:4318") {
		t.Fatalf("serve with a bad endpoint: %v, want an error naming OTEL_EXPORTER_OTLP_ENDPOINT and an example", err)
	}
}
