//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkGatewayReadOnly is a read-only call (read_text_file of the real
// filesystem server) straight to the upstream over stdio ("direct"), and
// through the gateway (the real server's /mcp, the Go SDK's client, the
// call passed through and audited), in one run. The two are interleaved in
// blocks of gwBlock calls, the order alternating, so that both see the same
// load on a shared machine. It reports each one's p50 and p99, the p50
// ratio, and the process's CPU per call of each (client included; the
// upstream's node process is not counted), and the gateway's added CPU.
// "hop" is a Countersign tool with no upstream behind it
// (export_public_key: one read transaction) through the same /mcp: the
// floor the HTTP hop and the MCP server's request path put under any call
// through the gateway. "stdio" is the gateway over the direct call's own
// transport: the same client on `countersign mcp` (in this process, over
// pipes, on a store of its own) with the same upstream behind it.
//
//	go test -run '^$' -bench GatewayReadOnly -benchtime 400x ./cmd/countersign
func BenchmarkGatewayReadOnly(b *testing.B) {
	benchGatewayReadOnly(b, "")
}

// gwBlock is how many calls of one side run back to back.
const gwBlock = 10

func benchGatewayReadOnly(b *testing.B, rule string) {
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
	if rule == "" {
		rule = `{match: "read_*", category: read-only}`
	}

	cmd := exec.Command(fsBin, dir)
	direct, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	gatewayConfig := `gateway:
  upstreams:
    - name: fs
      command: ` + fsBin + `
      args: [` + dir + `]
      tools:
        - ` + rule + `
`
	url, key := benchServerOn(b, gatewayConfig, map[string]string{"PATH": os.Getenv("PATH")})
	tr := &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key}}, MaxRetries: -1}
	gw, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()

	stdio := benchStdioGateway(b, gatewayConfig, map[string]string{"PATH": os.Getenv("PATH")})
	sides := []struct {
		name string
		call func()
		lat  []time.Duration
		cpu  time.Duration
	}{
		{name: "direct", call: func() { benchTool(b, direct, "read_text_file", args) }},
		{name: "gateway", call: func() { benchTool(b, gw, "fs__read_text_file", args) }},
		{name: "stdio", call: func() { benchTool(b, stdio, "fs__read_text_file", args) }},
		{name: "hop", call: func() { benchTool(b, gw, "export_public_key", map[string]any{}) }},
	}
	for i := range sides {
		for j := 0; j < 20; j++ { // warm-up
			sides[i].call()
		}
		sides[i].lat = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; round++ {
		n := min(gwBlock, b.N-done)
		for k := range sides {
			s := &sides[(k+round)%len(sides)] // each side goes first in turn
			c0 := processCPU(b)
			for j := 0; j < n; j++ {
				t0 := time.Now()
				s.call()
				s.lat = append(s.lat, time.Since(t0))
			}
			s.cpu += processCPU(b) - c0
		}
		done += n
	}
	b.StopTimer()
	p50 := map[string]time.Duration{}
	cpu := map[string]float64{}
	for _, s := range sides {
		sort.Slice(s.lat, func(i, j int) bool { return s.lat[i] < s.lat[j] })
		p50[s.name] = s.lat[len(s.lat)/2]
		cpu[s.name] = float64(s.cpu.Microseconds()) / float64(len(s.lat))
		b.ReportMetric(float64(p50[s.name].Microseconds()), s.name+"-p50-µs")
		b.ReportMetric(float64(s.lat[len(s.lat)*99/100].Microseconds()), s.name+"-p99-µs")
		b.ReportMetric(cpu[s.name], s.name+"-cpu-µs/op")
	}
	b.ReportMetric(float64(p50["gateway"])/float64(p50["direct"]), "p50-ratio")
	b.ReportMetric(cpu["gateway"]-cpu["direct"], "added-cpu-µs/op")
	b.ReportMetric(float64(p50["stdio"])/float64(p50["direct"]), "stdio-p50-ratio")
}

// benchTool calls tool once; an error or a tool error stops the benchmark.
func benchTool(b *testing.B, cs *sdk.ClientSession, tool string, args map[string]any) {
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil || r.IsError {
		b.Fatalf("%s: %v %+v, want no error and no tool error", tool, err, r)
	}
}

// benchStdioGateway runs `countersign mcp` in process on a store of its own
// with config, over pipes, and connects the Go SDK's client to it.
func benchStdioGateway(b *testing.B, config string, env map[string]string) *sdk.ClientSession {
	b.Helper()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	full := "store:\n  path: " + filepath.Join(dir, "countersign.db") + "\n" + config + benchConfig
	if err := os.WriteFile(cfg, []byte(full), 0o600); err != nil {
		b.Fatal(err)
	}
	getenv := func(k string) string { return env[k] }
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"keys", "create", "--config", cfg, "--name", "bench", "--role", "agent"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		b.Fatalf("keys create: %v (%s)", err, errb.String())
	}
	key := strings.TrimSpace(out.String())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "--config", cfg, "--key", key}, getenv, inR, outW, io.Discard)
		outW.Close()
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cs.Close()
		inW.Close()
		cancel()
		<-done
	})
	return cs
}
