package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/admintools"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkHTTPToolCall is one tools/call on the streamable HTTP handler
// by the Go SDK's client over loopback, as a 2026-07-28 client sends it
// (the Mcp-Method and Mcp-Name headers, which the SDK's server checks
// against the body and the tool's input schema). Its allocations, the
// client's and the server's, are the figure to watch: they do not move
// with the machine's load.
//
//	go test -run '^$' -bench HTTPToolCall -benchmem ./adapters/mcp
func BenchmarkHTTPToolCall(b *testing.B) {
	bt := testbot.New(b, bot.Options{Store: bottest.OpenStore(b)})
	if err := admintools.Register(bt); err != nil {
		b.Fatal(err)
	}
	caller := &bot.Caller{Principal: admin.Principal, Surface: "mcp"}
	h := NewHTTPHandler(HTTPOptions{App: bt, Version: "bench", MaxBody: 1 << 20, CallerFrom: func(context.Context) *bot.Caller { return caller }})
	srv := httptest.NewServer(h)
	defer srv.Close()
	hc := &http.Client{Transport: bearer{"k", http.DefaultTransport}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	call := func() {
		r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "list_principals", Arguments: map[string]any{}})
		if err != nil || r.IsError || !strings.Contains(text(r), "No principals yet") {
			b.Fatalf("tools/call = %+v (err %v), want a text containing %q", r, err, "No principals yet")
		}
	}
	call()
	b.ReportAllocs()
	for b.Loop() {
		call()
	}
}
