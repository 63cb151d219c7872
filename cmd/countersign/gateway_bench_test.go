//go:build unix

package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkGatewayReadOnly is a read-only call (read_text_file of the real
// filesystem server) straight to the upstream over stdio, and through the
// gateway (the real server's /mcp, the Go SDK's client, one audit entry
// per call), in one run. Each reports its p50 and the process's CPU per
// call (client included; the upstream's node process is not counted).
//
//	go test -run '^$' -bench GatewayReadOnly -benchtime 400x ./cmd/countersign
func BenchmarkGatewayReadOnly(b *testing.B) {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "rota.txt")
	if err := os.WriteFile(path, []byte("ward 7: Lee on nights"), 0o600); err != nil {
		b.Fatal(err)
	}
	fsBin := nodetest.Bin(b, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	args := map[string]any{"path": path}

	b.Run("direct", func(b *testing.B) {
		cmd := exec.Command(fsBin, dir)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		benchCalls(b, cs, "read_text_file", args)
	})
	b.Run("gateway", func(b *testing.B) {
		url, key := benchServerOn(b, `gateway:
  upstreams:
    - name: fs
      command: `+fsBin+`
      args: [`+dir+`]
      tools:
        - {match: "read_*", category: read-only}
`, map[string]string{"PATH": os.Getenv("PATH")})
		tr := &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key}}, MaxRetries: -1}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), tr, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		benchCalls(b, cs, "fs__read_text_file", args)
	})
}

// benchCalls makes b.N calls of tool after a warm-up, and reports p50 and
// CPU per call.
func benchCalls(b *testing.B, cs *sdk.ClientSession, tool string, args map[string]any) {
	b.Helper()
	call := func() {
		r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil || r.IsError {
			b.Fatalf("%s: %v %+v", tool, err, r)
		}
	}
	for i := 0; i < 20; i++ {
		call()
	}
	lat := make([]time.Duration, 0, b.N)
	cpu := cpuMeter{b: b, start: processCPU(b)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		call()
		lat = append(lat, time.Since(t0))
	}
	cpu.report()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
