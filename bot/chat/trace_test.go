package chat_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/countersign/countersign/policy"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestDecideSpan: a decision is a span naming the surface, the item, the
// verb and the status, parent of the tool call that made it; a refusal
// says so; neither names the person, the reason or the request's text.
func TestDecideSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	b := testbot.New(t, bot.Options{Sinks: []string{"slack"}, Now: func() time.Time { return t0 },
		Tracing: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if _, err := actiontools.Register(b, actiontools.Options{Tools: []actiontools.ToolSpec{{Name: "delete_database", Category: "destructive", Timeout: time.Hour}}}); err != nil {
		t.Fatal(err)
	}
	dir, err := bot.NewDirectory([]bot.ChatPrincipal{{Name: "dr_smith", Role: policy.RoleMember, Slack: uSmith}, {Name: "vic", Role: policy.RoleViewer, Slack: uViewer}})
	if err != nil {
		t.Fatal(err)
	}
	b.Chat().SetDirectory(dir)
	agent := &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "deploy-bot", Role: policy.RoleAgent, Kind: "agent"}, Surface: "http"}
	raw, _ := json.Marshal(map[string]any{"tool": "delete_database", "arguments": map[string]any{"db": "orders-secret-db"}, "summary": "drop it", "dry_run": "DROP orders-secret-db", "user_id": "patient_42"})
	if _, err := b.Call(context.Background(), agent, "confirm_action", raw); err != nil {
		t.Fatal(err)
	}
	ctx := bot.WithRequestID(context.Background(), "rid-click")
	if out := chat.Decide(ctx, b, click(uViewer, 1, chat.Approve, "v1")); out.Status != chat.Refused {
		t.Fatalf("viewer: %+v, want refused", out)
	}
	d := chat.Decision{Surface: bot.SurfaceSlack, UserID: uSmith, ItemID: 1, Verb: chat.Reject, Reason: "not tonight reason-secret", Deliveries: []string{"slack:trigger:s1"}}
	if out := chat.Decide(ctx, b, d); out.Status != chat.Decided {
		t.Fatalf("reject: %+v, want decided", out)
	}
	var decides []sdktrace.ReadOnlySpan
	calls := map[string]sdktrace.ReadOnlySpan{} // by parent span id
	for _, s := range rec.Ended() {
		switch {
		case s.Name() == "chat.decide":
			decides = append(decides, s)
		case strings.HasPrefix(s.Name(), "execute_tool ") && s.Parent().IsValid():
			calls[s.Parent().SpanID().String()] = s
		}
		for _, kv := range s.Attributes() {
			for _, secret := range []string{"orders-secret-db", "reason-secret", "dr_smith", uSmith, "vic", uViewer, "patient_42", "s1"} {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("span %q: %s = %q holds %q", s.Name(), kv.Key, kv.Value.String(), secret)
				}
			}
		}
	}
	if len(decides) != 2 {
		t.Fatalf("%d chat.decide spans, want 2", len(decides))
	}
	want := []map[string]string{
		{"countersign.outcome": "refused", "countersign.verb": "approve"},
		{"countersign.outcome": "decided", "countersign.verb": "reject"},
	}
	for i, s := range decides {
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.String()
		}
		for k, v := range map[string]string{"countersign.surface": "slack", "countersign.item_id": "1", "countersign.request_id": "rid-click"} {
			want[i][k] = v
		}
		for k, v := range want[i] {
			if got[k] != v {
				t.Errorf("decision %d: %s = %q, want %q (%v)", i, k, got[k], v, got)
			}
		}
		call, ok := calls[s.SpanContext().SpanID().String()]
		if !ok {
			t.Errorf("decision %d has no tool call span under it", i)
			continue
		}
		if want := map[int]string{0: "execute_tool approve_action", 1: "execute_tool deny_action"}[i]; call.Name() != want {
			t.Errorf("decision %d's call is %q, want %q", i, call.Name(), want)
		}
	}
}
