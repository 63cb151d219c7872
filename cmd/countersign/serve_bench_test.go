//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchConfig is bench/'s server config (bench/http.go): rate limits out of
// the way, info logs.
const benchConfig = `
http:
  rate_per_minute: 1000000000
  rate_burst: 100000000
memory:
  slots:
    - {name: active_medication, category: active_medication, verbatim: true, multi: true, confirm: true}
    - {name: allergy, category: allergy, verbatim: true, multi: true}
  critical_categories: [allergy, active_medication]
log:
  level: info
`

// benchServer runs the real server (run serve) on a free loopback port with
// an admin key, its logs going to a file as in production, and the G1
// subject seeded (10 facts). It returns the base URL and the key.
func benchServer(b *testing.B) (url, key string) { return benchServerOn(b, "", nil) }

// benchServerOn is benchServer with extra store: lines (an engine) and
// environment.
func benchServerOn(b *testing.B, store string, env map[string]string) (url, key string) {
	b.Helper()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	full := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(dir, "countersign.db") + "\n" + store + benchConfig
	if err := os.WriteFile(cfg, []byte(full), 0o600); err != nil {
		b.Fatal(err)
	}
	getenv := func(k string) string { return env[k] }
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"keys", "create", "--config", cfg, "--name", "bench", "--role", "admin"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		b.Fatalf("keys create: %v (%s)", err, errb.String())
	}
	key = strings.TrimSpace(out.String())
	logPath := filepath.Join(dir, "server.log")
	logf, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfg}, getenv, strings.NewReader(""), io.Discard, logf)
	}()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("server: %v", err)
		}
		logf.Close()
	})
	var a string
	for deadline := time.Now().Add(30 * time.Second); a == ""; {
		if time.Now().After(deadline) {
			b.Fatal("the server logged no listening address within 30s")
		}
		select {
		case err := <-done:
			done <- err
			b.Fatalf("server did not start: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
		logs, _ := os.ReadFile(logPath)
		if m := listenRE.FindSubmatch(logs); m != nil {
			a = string(m[1])
		}
	}
	url = "http://" + a
	c := benchClient()
	for i := 0; i < 10; i++ {
		if err := benchCall(c, url, key, "remember", fmt.Sprintf(`{"subject":"allergy","value":"allergen-%02d"}`, i)); err != nil {
			b.Fatal(err)
		}
	}
	return url, key
}

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxIdleConns: 256, DisableCompression: true}}
}

func benchCall(c *http.Client, url, key, tool, body string) error {
	req, _ := http.NewRequest("POST", url+"/v1/tools/"+tool, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d %s", tool, resp.StatusCode, b)
	}
	return nil
}

const benchCheckBody = `{"max_staleness_days":365,"subject":"allergy"}`

// BenchmarkHTTPCheckBeforeAct is G2 and G3 of bench/ in process: the whole
// server (run serve) over loopback keep-alive HTTP, one client and 32. The
// load generator shares the process, so a CPU profile shows both; read the
// server's side under webhook, bot and net/http's serverHandler.
//
//	go test -run '^$' -bench HTTPCheckBeforeAct -cpuprofile cpu.out ./cmd/countersign
func BenchmarkHTTPCheckBeforeAct(b *testing.B) {
	url, key := benchServer(b)
	b.Run("clients=1", func(b *testing.B) {
		c := benchClient()
		b.ReportAllocs()
		cpu := startCPU(b)
		for b.Loop() {
			if err := benchCall(c, url, key, "check_before_act", benchCheckBody); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report()
	})
	b.Run("clients=32", func(b *testing.B) {
		c := benchClient()
		b.ReportAllocs()
		b.SetParallelism((32 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)) // 32 clients
		cpu := startCPU(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := benchCall(c, url, key, "check_before_act", benchCheckBody); err != nil {
					b.Error(err)
					return
				}
			}
		})
		cpu.report()
	})
}

// cpuMeter reports the process's CPU time (user + system, client and
// server together) per operation, which other processes sharing the cores
// disturb less than they disturb the wall-clock time per operation.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) cpuMeter {
	b.ResetTimer()
	return cpuMeter{b: b, start: processCPU(b)}
}

func (m cpuMeter) report() {
	m.b.StopTimer()
	used := processCPU(m.b) - m.start
	m.b.ReportMetric(float64(used.Microseconds())/float64(m.b.N), "cpu-µs/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
