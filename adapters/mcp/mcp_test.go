package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/admintools"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/policy"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// newBot returns a bot on a real store with the administration tools and
// two test tools: "explode" fails with an internal error that must not
// leak, "panic" panics.
func newBot(t *testing.T) *bot.Bot {
	t.Helper()
	b := testbot.New(t, bot.Options{Store: bottest.OpenStore(t)})
	if err := admintools.Register(b); err != nil {
		t.Fatal(err)
	}
	type noArgs struct{}
	err := b.Register(
		bot.Tool{Name: "explode", Description: "fails", Capability: policy.CapRead, Args: noArgs{}, Handler: func(context.Context, *bot.Call, any) (bot.Result, error) {
			return bot.Result{}, errors.New("open /var/lib/countersign/secret.db: permission denied")
		}},
		bot.Tool{Name: "panic", Description: "panics", Capability: policy.CapRead, Args: noArgs{}, Handler: func(context.Context, *bot.Call, any) (bot.Result, error) {
			panic("boom")
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func callerOf(c *bot.Caller) CallerFunc {
	return func(context.Context, *sdk.CallToolRequest) (*bot.Caller, error) { return c, nil }
}

var (
	admin = &bot.Caller{Principal: bot.Principal{ID: "prin_admin", Name: "ops", Role: policy.RoleAdmin}, Surface: "mcp"}
	agent = &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "bot", Role: policy.RoleAgent}, Surface: "mcp"}
)

// connect serves b in memory for caller and returns a client session.
func connect(t *testing.T, b *bot.Bot, caller CallerFunc, logs io.Writer) *sdk.ClientSession {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	st, ct := sdk.NewInMemoryTransports()
	srv := NewServer(Options{App: b, Caller: caller, Version: "test", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *sdk.ClientSession, tool string, args any) *sdk.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return r
}

func text(r *sdk.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestEveryToolIsListedOnceWithSchemaAndAnnotations(t *testing.T) {
	b := newBot(t)
	cs := connect(t, b, callerOf(admin), nil)
	listed := map[string]*sdk.Tool{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if listed[tool.Name] != nil {
			t.Fatalf("%s listed twice", tool.Name)
		}
		listed[tool.Name] = tool
	}
	infos := b.Tools()
	if len(listed) != len(infos) {
		t.Fatalf("listed %d tools, want %d (the registry's)", len(listed), len(infos))
	}
	for _, ti := range infos {
		tool := listed[ti.Name]
		if tool == nil {
			t.Fatalf("%s not listed", ti.Name)
		}
		want, _ := json.Marshal(ti.Schema)
		got, _ := json.Marshal(tool.InputSchema)
		if !jsonEqual(t, want, got) {
			t.Fatalf("%s schema:\n got %s\nwant %s", ti.Name, got, want)
		}
		a := tool.Annotations
		if tool.Description != ti.Description || a == nil || a.ReadOnlyHint != ti.Annotations.ReadOnly ||
			a.DestructiveHint == nil || *a.DestructiveHint != ti.Annotations.Destructive || a.IdempotentHint != ti.Annotations.Idempotent ||
			a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Fatalf("%s: %+v annotations %+v, want the registry's description and annotations %+v, open-world false", ti.Name, tool, a, ti.Annotations)
		}
	}
	// Spot checks against the reference's annotations.
	if a := listed["revoke_principal"].Annotations; a.ReadOnlyHint || !*a.DestructiveHint || !a.IdempotentHint {
		t.Fatalf("revoke_principal annotations = %+v, want not read-only, destructive, idempotent", a)
	}
	if a := listed["create_principal"].Annotations; a.ReadOnlyHint || *a.DestructiveHint {
		t.Fatalf("create_principal annotations = %+v, want not read-only, not destructive", a)
	}
	if req := listed["create_principal"].InputSchema.(map[string]any)["required"]; !strings.Contains(mustJSON(req), `"name"`) {
		t.Fatalf("create_principal requires %v, want it to list %s", req, `"name"`)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		t.Fatalf("not JSON: %s / %s", a, b)
	}
	return mustJSON(x) == mustJSON(y)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestCallsGoThroughTheRegistry(t *testing.T) {
	b := newBot(t)
	cs := connect(t, b, callerOf(admin), nil)
	r := call(t, cs, "create_principal", map[string]any{"name": "support-bot", "role": "agent"})
	if r.IsError || !strings.HasPrefix(text(r), "Created principal prin_") || !strings.Contains(text(r), "'support-bot' (role: agent, kind: agent).") {
		t.Fatalf("create = %+v %q, want no error and a text starting %q containing %q", r, text(r), "Created principal prin_", "'support-bot' (role: agent, kind: agent).")
	}
	sc, _ := r.StructuredContent.(map[string]any)
	if sc["name"] != "support-bot" || !strings.HasPrefix(sc["key"].(string), bot.KeyPrefix) {
		t.Fatalf("structured = %#v, want name %q and a key starting %q", r.StructuredContent, "support-bot", bot.KeyPrefix)
	}
	// The same answer as the HTTP API would give, text and data alike.
	r = call(t, cs, "list_principals", nil)
	if !strings.HasPrefix(text(r), "• prin_") || r.StructuredContent.(map[string]any)["count"] != float64(1) {
		t.Fatalf("list = %q %#v, want a text starting %q and count 1", text(r), r.StructuredContent, "• prin_")
	}
	// Bad arguments: a tool error naming the field.
	r = call(t, cs, "create_principal", map[string]any{"name": "x", "role": "owner"})
	if !r.IsError || text(r) != "role: Unknown role 'owner'. Use: admin, member, agent, viewer, auditor." {
		t.Fatalf("bad role = %+v %q, want a tool error %q", r, text(r), "role: Unknown role 'owner'. Use: admin, member, agent, viewer, auditor.")
	}
	if sc := r.StructuredContent.(map[string]any); sc["field"] != "role" || sc["kind"] != "invalid" {
		t.Fatalf("bad role data = %#v, want field %q, kind %q", sc, "role", "invalid")
	}
	r = call(t, cs, "create_principal", map[string]any{"nom": "x"})
	if !r.IsError || !strings.Contains(text(r), "nom: unknown argument") {
		t.Fatalf("unknown argument = %q (error %v), want a tool error containing %q", text(r), r.IsError, "nom: unknown argument")
	}
	// An unknown tool is a protocol error, as the SDK does it.
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "nope"}); err == nil {
		t.Fatal("unknown tool answered")
	}
}

func TestDenialsKeepTheirWording(t *testing.T) {
	b := newBot(t)
	cs := connect(t, b, callerOf(agent), nil)
	r := call(t, cs, "create_principal", map[string]any{"name": "x"})
	if !r.IsError || text(r) != "Access denied: 'create_principal' requires the 'admin' capability; your role(s) ['agent'] do not grant it." {
		t.Fatalf("denied = %q (error %v), want a tool error %q", text(r), r.IsError, "Access denied: 'create_principal' requires the 'admin' capability; your role(s) ['agent'] do not grant it.")
	}
	r = call(t, cs, "audit_log", map[string]any{})
	if !r.IsError || text(r) != admintools.DenyDeploymentAudit {
		t.Fatalf("audit_log = %q (error %v), want a tool error %q", text(r), r.IsError, admintools.DenyDeploymentAudit)
	}
	// No caller at all: the reference's authentication-required refusal.
	cs = connect(t, b, callerOf(nil), nil)
	r = call(t, cs, "verify_audit", nil)
	if !r.IsError || !strings.HasPrefix(text(r), "Access denied: authentication required.") {
		t.Fatalf("anonymous = %q (error %v), want a tool error starting %q", text(r), r.IsError, "Access denied: authentication required.")
	}
}

func TestFaultsDoNotLeak(t *testing.T) {
	b := newBot(t)
	var logs bytes.Buffer
	cs := connect(t, b, callerOf(admin), &logs)
	for _, tool := range []string{"explode", "panic"} {
		r := call(t, cs, tool, nil)
		if !r.IsError || !strings.HasPrefix(text(r), "Countersign couldn't complete that (ref ") || strings.Contains(text(r), "secret.db") || strings.Contains(text(r), "boom") {
			t.Fatalf("%s = %q (error %v), want a tool error starting %q, with no %q or %q in it", tool, text(r), r.IsError, "Countersign couldn't complete that (ref ", "secret.db", "boom")
		}
	}
	if !strings.Contains(logs.String(), "secret.db") || !strings.Contains(logs.String(), "boom") {
		t.Fatalf("server log = %s, want the detail (%q and %q) in it", logs.String(), "secret.db", "boom")
	}
	// The session survives both.
	if r := call(t, cs, "export_public_key", nil); r.IsError {
		t.Fatalf("after faults: export_public_key = %q, a tool error; want a result (the session survives both)", text(r))
	}
}

func TestStdio(t *testing.T) {
	b := newBot(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- ServeStdio(ctx, Options{App: b, Caller: callerOf(admin), Version: "test"}, inR, outW)
		outW.Close()
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := call(t, cs, "verify_audit", nil); r.IsError || text(r) != "✓ Audit chain INTACT — 0 entries verified." {
		t.Fatalf("verify = %q (error %v), want %q", text(r), r.IsError, "✓ Audit chain INTACT — 0 entries verified.")
	}
	if got := cs.InitializeResult().ServerInfo; got.Name != "countersign" || got.Version != "test" {
		t.Fatalf("server info = %+v, want name %q, version %q", got, "countersign", "test")
	}
	cs.Close() // closes stdin: the server ends cleanly
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return when stdin closed")
	}
}

type callerKey struct{}

func TestHTTPHandlerUsesTheRequestsCaller(t *testing.T) {
	b := newBot(t)
	h := NewHTTPHandler(HTTPOptions{App: b, Version: "test", MaxBody: 1 << 20, CallerFrom: func(ctx context.Context) *bot.Caller {
		c, _ := ctx.Value(callerKey{}).(*bot.Caller)
		return c
	}})
	// A stand-in for the authentication middleware: the key names the role.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := agent
		if strings.HasSuffix(r.Header.Get("Authorization"), "admin") {
			c = admin
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	}))
	defer srv.Close()
	session := func(key string) *sdk.ClientSession {
		hc := &http.Client{Transport: bearer{key, http.DefaultTransport}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	if r := call(t, session("admin"), "list_principals", nil); r.IsError || text(r) != "No principals yet. Create one with create_principal." {
		t.Fatalf("admin = %q (error %v), want %q", text(r), r.IsError, "No principals yet. Create one with create_principal.")
	}
	if r := call(t, session("agent"), "list_principals", nil); !r.IsError || !strings.Contains(text(r), "['agent'] do not grant it") {
		t.Fatalf("agent = %q (error %v), want a tool error containing %q", text(r), r.IsError, "['agent'] do not grant it")
	}
	// GET (a server stream) is not offered: 405, as the protocol allows.
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET status = %d, want %d", resp.StatusCode, http.StatusMethodNotAllowed)
	}
}

type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}
