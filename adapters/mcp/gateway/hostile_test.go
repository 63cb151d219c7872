package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpUpstream serves a go-sdk MCP server over streamable HTTP that wants
// the header X-Token: tok, with tools hang (answers only when cancelled)
// and huge (an answer of 10 MiB).
func httpUpstream(t *testing.T) (*sdk.Server, string) {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "hostile", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	s.AddTool(&sdk.Tool{Name: "hang", InputSchema: obj}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.AddTool(&sdk.Tool{Name: "huge", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("x", 10<<20)}}}, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "tok-value" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// TestHTTPUpstreamHostileAnswersAndListChanged: a streamable-HTTP upstream
// reached with the configured header; a call that hangs ends at the call
// timeout and one that answers 10 MiB is refused, each with a clear error
// while the gateway goes on serving; a tool the upstream adds later is
// served after its notifications/tools/list_changed.
func TestHTTPUpstreamHostileAnswersAndListChanged(t *testing.T) {
	s, url := httpUpstream(t)
	g, err := New(Options{
		Upstreams:   []Upstream{{Name: "web", URL: url, Header: http.Header{"X-Token": {"tok-value"}}, Default: "read-only"}},
		CallTimeout: 5 * time.Second, MaxResultBytes: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() }) // before the upstream's server closes
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := g.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if down := g.Down(); len(down) != 0 {
		t.Fatalf("Down() = %v, want none: the header did not reach the upstream?", down)
	}
	changed := make(chan struct{}, 4)
	g.Subscribe(func() { changed <- struct{}{} })

	if _, err := g.Forward(ctx, "web__hang", []byte("{}")); err == nil || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("a hanging call answered %v, want the timeout named, and that whether it ran is unknown", err)
	}
	// The size check is played on a gateway whose call timeout is long:
	// a loaded machine may take over 5 s to produce and stream 10 MiB, and
	// the refusal asserted is the size limit's, not the clock's.
	big, err := New(Options{
		Upstreams:   []Upstream{{Name: "web", URL: url, Header: http.Header{"X-Token": {"tok-value"}}, Default: "read-only"}},
		CallTimeout: 5 * time.Minute, MaxResultBytes: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = big.Close() })
	if err := big.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := big.Forward(ctx, "web__huge", []byte("{}")); err == nil || !strings.Contains(err.Error(), "over the gateway's limit") {
		t.Errorf("a 10 MiB answer gave %v, want it refused by size", err)
	}

	s.AddTool(&sdk.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "late answer"}}}, nil
	})
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream's tools/list_changed was never acted on")
	}
	tl, ok := g.Tool("web__late")
	if !ok || tl.Category != "read-only" {
		t.Fatalf("web__late after list_changed: served %v, category %q; want served, %q", ok, tl.Category, "read-only")
	}
	res, err := g.Forward(ctx, "web__late", []byte("{}"))
	if err != nil || text(res) != "late answer" {
		t.Fatalf("web__late = %v, %v, want %q", res, err, "late answer")
	}
}

// TestKilledUpstreamAnswersDownThenComesBack: while a killed stdio
// upstream waits for its restart (the backoff, held by the test's clock),
// its tools answer a DownError naming it and Down names it; once the
// backoff ends it is started again and answers.
func TestKilledUpstreamAnswersDownThenComesBack(t *testing.T) {
	dir := nodetest.Dir(t, "@modelcontextprotocol/sdk")
	slept, release := make(chan time.Duration, 4), make(chan struct{})
	g, err := New(Options{
		Upstreams: []Upstream{{Name: "lying", Command: nodetest.Node(t), Args: []string{"lying_server.mjs"}, Dir: dir}},
		Sleep: func(ctx context.Context, d time.Duration) error {
			slept <- d
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := g.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 4)
	g.Subscribe(func() { changed <- struct{}{} })
	go func() { _ = g.Run(ctx) }()
	g.byName["lying"].mu.Lock()
	proc := g.byName["lying"].proc
	g.byName["lying"].mu.Unlock()
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-slept:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed upstream's exit was not seen")
	}
	target := t.TempDir() + "/x"
	_, err = g.Forward(ctx, "lying__wipe", mustJSON(map[string]any{"path": target}))
	de, ok := err.(*DownError)
	if !ok || de.Upstream != "lying" || !strings.Contains(err.Error(), "was not called") {
		t.Fatalf("a call while it is down answered %v, want a DownError naming it", err)
	}
	if names := g.DownNames(); len(names) != 1 || names[0] != "lying" {
		t.Fatalf("DownNames() = %v, want [lying]", names)
	}
	close(release)
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream was not started again")
	}
	if _, err := g.Forward(ctx, "lying__wipe", mustJSON(map[string]any{"path": target})); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if names := g.DownNames(); len(names) != 0 {
		t.Fatalf("DownNames() = %v after the restart, want none", names)
	}
}
