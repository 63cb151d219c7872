package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fsUpstream is the real @modelcontextprotocol/server-filesystem over dir.
func fsUpstream(t *testing.T, dir string) Upstream {
	t.Helper()
	bin := nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	return Upstream{
		Name: "fs", Command: bin, Args: []string{dir},
		Env:   []string{"PATH=" + os.Getenv("PATH"), "FS_TOKEN=s3cret-token-value"},
		Rules: []Rule{{Match: "read_*", Category: "read-only"}, {Match: "write_file", Category: "mutating"}, {Match: "move_file", Category: "destructive"}},
	}
}

func TestClassifyFirstMatchWinsAndDefaultFailsClosed(t *testing.T) {
	rules := []Rule{{Match: "read_*", Category: "read-only"}, {Match: "read_secret", Category: "destructive"}, {Match: "[wx]rite_file", Category: "mutating"}}
	u := Upstream{Rules: rules}
	for _, c := range []struct{ tool, want string }{
		{"read_file", "read-only"},
		{"read_secret", "read-only"}, // the first match wins
		{"write_file", "mutating"},
		{"xrite_file", "mutating"},
		{"delete_everything", ""}, // no rule, no default: unclassified (a confirmation)
	} {
		if got := u.Category(c.tool); got != c.want {
			t.Errorf("Category(%s) = %q, want %q", c.tool, got, c.want)
		}
	}
	u.Default = "mutating"
	if got := u.Category("delete_everything"); got != "mutating" {
		t.Errorf("with default mutating, Category(delete_everything) = %q, want %q", got, "mutating")
	}
	if err := CheckRule("read_["); err == nil {
		t.Error("CheckRule(read_[) = nil, want a bad-glob error")
	}
	for _, bad := range []string{"", "fs_x", "a b", strings.Repeat("a", 33)} {
		if CheckName(bad) == nil {
			t.Errorf("CheckName(%q) = nil, want an error", bad)
		}
	}
	if up, tool, ok := Split("fs__read__file"); !ok || up != "fs" || tool != "read__file" {
		t.Errorf("Split(fs__read__file) = %q %q %v, want %q %q true", up, tool, ok, "fs", "read__file")
	}
	if _, _, ok := Split("confirm_action"); ok {
		t.Error("Split(confirm_action) is an upstream tool")
	}
}

// TestFilesystemUpstream connects to the real filesystem server, serves
// its tools under fs__, classifies them from the rules only, forwards a
// write exactly, and restarts the server after it is killed.
func TestFilesystemUpstream(t *testing.T) {
	dir := t.TempDir()
	slept := make(chan time.Duration, 16)
	var logs syncBuf
	g, err := New(Options{
		Upstreams: []Upstream{fsUpstream(t, dir)},
		Logger:    newLogger(&logs),
		Sleep: func(ctx context.Context, d time.Duration) error {
			slept <- d
			return ctx.Err()
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
	if down := g.Down(); len(down) != 0 {
		t.Fatalf("Down() = %v after connecting, want none", down)
	}
	want := map[string]string{"fs__read_text_file": "read-only", "fs__write_file": "mutating", "fs__move_file": "destructive", "fs__list_directory": ""}
	got := map[string]string{}
	for _, tl := range g.Tools() {
		got[tl.Name] = tl.Category
	}
	for name, cat := range want {
		if c, ok := got[name]; !ok || c != cat {
			t.Errorf("tool %s: served %v with category %q, want category %q (tools: %v)", name, ok, c, cat, got)
		}
	}

	changes := make(chan struct{}, 4)
	g.Subscribe(func() { changes <- struct{}{} })
	runDone := make(chan struct{})
	go func() { _ = g.Run(ctx); close(runDone) }()

	path := filepath.Join(dir, "a.txt")
	args, _ := json.Marshal(map[string]any{"path": path, "content": "exactly this"})
	res, err := g.Forward(ctx, "fs__write_file", args)
	if err != nil || res.IsError {
		t.Fatalf("Forward(write_file) = %v, %v, want a result that is no error", res, err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "exactly this" {
		t.Fatalf("file holds %q (%v), want the forwarded content", b, err)
	}
	if _, err := g.Forward(ctx, "fs__no_such_tool", []byte("{}")); err == nil || !strings.Contains(err.Error(), "does not offer") {
		t.Errorf("Forward(no_such_tool) = %v, want 'does not offer'", err)
	}

	// Kill the upstream: its tools answer a clear error, Down names it,
	// and it is restarted after the backoff.
	g.byName["fs"].mu.Lock()
	proc := g.byName["fs"].proc
	g.byName["fs"].mu.Unlock()
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var d time.Duration
	select {
	case d = <-slept:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed upstream was never restarted")
	}
	if d != time.Second {
		t.Errorf("first backoff %s, want 1s", d)
	}
	// While it sleeps (this test's Sleep returns at once, so the restart
	// may already have happened): the down state was recorded.
	if !strings.Contains(logs.String(), "upstream stopped; restarting with backoff") {
		t.Errorf("no log of the stop, want %q in:\n%s", "upstream stopped; restarting with backoff", logs.String())
	}
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("the restarted upstream never reported its tools")
	}
	if down := g.Down(); len(down) != 0 {
		t.Errorf("Down() = %v after the restart, want none", down)
	}
	res, err = g.Forward(ctx, "fs__read_text_file", mustJSON(map[string]any{"path": path}))
	if err != nil || res.IsError || !strings.Contains(text(res), "exactly this") {
		t.Errorf("read after restart = %v %v, want a result containing %q", res, err, "exactly this")
	}
	if strings.Contains(logs.String(), "s3cret-token-value") {
		t.Errorf("a configured secret reached the log:\n%s", logs.String())
	}
	cancel()
	<-runDone
}

func TestDownUpstreamAnswersClearly(t *testing.T) {
	g, err := New(Options{Upstreams: []Upstream{{Name: "gone", Command: filepath.Join(t.TempDir(), "missing")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Connect(context.Background()); err != nil {
		t.Fatalf("Connect = %v, want nil (a down upstream is reported, not fatal)", err)
	}
	down := g.Down()
	if len(down) != 1 || !strings.HasPrefix(down[0], "gone: ") {
		t.Fatalf("Down() = %v, want the upstream named", down)
	}
	_, err = g.Forward(context.Background(), "gone__x", []byte("{}"))
	if de, ok := err.(*DownError); !ok || de.Upstream != "gone" {
		t.Fatalf("Forward on a down upstream = %v, want a DownError", err)
	}
}

func TestReservedNameStopsConnect(t *testing.T) {
	dir := t.TempDir()
	g, err := New(Options{Upstreams: []Upstream{fsUpstream(t, dir)}, Reserved: func(n string) bool { return n == "fs__write_file" }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := g.Connect(ctx); err == nil || !strings.Contains(err.Error(), "fs__write_file") {
		t.Fatalf("Connect = %v, want the collision named", err)
	}
}

func mustJSON(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

func text(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newLogger(w *syncBuf) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
