package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// postRaw posts body to path with key and extra headers.
func (e *testEnv) postRaw(path, key string, body []byte, header ...string) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestRateLimitPerPrincipal(t *testing.T) {
	t.Parallel()
	// One call a minute after a burst of two: the third call within the
	// minute is refused, whoever else is calling.
	e := newTestEnv(t, "http:\n  rate_per_minute: 1\n  rate_burst: 2\n")
	a := e.CreateKey("a", "viewer")
	b := e.CreateKey("b", "viewer")
	e.Start()
	for i := 0; i < 2; i++ {
		e.MustOK(a, "export_public_key", nil)
	}
	resp, body := e.postRaw("/v1/tools/export_public_key", a, []byte(`{}`))
	secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || secs < 1 || secs > 60 || !strings.Contains(body, "rate limit exceeded") {
		t.Fatalf("third call: %d, Retry-After %q, %s; want %d, Retry-After 1-60 and %q", resp.StatusCode, resp.Header.Get("Retry-After"), body, http.StatusTooManyRequests, "rate limit exceeded")
	}
	e.MustOK(b, "export_public_key", nil)
	// MCP tool calls draw on the same bucket; its handshake takes nothing.
	resp, _ = e.postRaw("/mcp", a, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), "Accept", "application/json, text/event-stream")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mcp ping: status %d, want %d", resp.StatusCode, http.StatusOK)
	}
	resp, _ = e.postRaw("/mcp", a, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"export_public_key","arguments":{}}}`), "Accept", "application/json, text/event-stream")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("mcp tool call: status %d, want %d", resp.StatusCode, http.StatusTooManyRequests)
	}
}

func TestBodyLimitOverHTTP(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "http:\n  max_body_bytes: 1024\n")
	key := e.CreateKey("ops", "admin")
	e.Start()
	big := []byte(`{"name":"` + strings.Repeat("a", 2000) + `"}`)
	for _, h := range [][]string{nil, {"Idempotency-Key", "k1"}} {
		resp, body := e.postRaw("/v1/tools/create_principal", key, big, h...)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "request body too large: the limit is 1024 bytes") {
			t.Fatalf("%v: %d %s, want %d and %q", h, resp.StatusCode, body, http.StatusRequestEntityTooLarge, "request body too large: the limit is 1024 bytes")
		}
	}
	if list := e.MustOK(key, "list_principals", nil); strings.Count(list.Text, "\n") != 0 {
		t.Fatalf("a too-large call created something, want a one-line list: %s", list.Text)
	}
}

func TestIdempotencyKeyOverHTTP(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	key := e.CreateKey("ops", "admin")
	e.Start()
	body := []byte(`{"name":"support-bot","role":"agent"}`)
	r1, b1 := e.postRaw("/v1/tools/create_principal", key, body, "Idempotency-Key", "7f1d3c1e-create")
	r2, b2 := e.postRaw("/v1/tools/create_principal", key, []byte(`{"role":"agent", "name":"support-bot"}`), "Idempotency-Key", "7f1d3c1e-create")
	if r1.StatusCode != 200 || r2.StatusCode != 200 || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %d, replay %d %v; want 200, 200 and Idempotent-Replayed: true", r1.StatusCode, r2.StatusCode, r2.Header)
	}
	id := regexp.MustCompile(`prin_[0-9a-f]{12}`).FindString(b1)
	if id == "" || !strings.Contains(b2, id) || !strings.Contains(b1, "cs_sk_") || strings.Contains(b2, "\\n  cs_sk_"+strings.Split(strings.Split(b1, "cs_sk_")[1], "\"")[0]) {
		t.Fatalf("replay must name the same principal and withhold the key:\n%s\n%s", b1, b2)
	}
	if !strings.Contains(b2, "withheld") {
		t.Fatalf("replay = %s, want it to contain %q", b2, "withheld")
	}
	list := e.MustOK(key, "list_principals", nil)
	if strings.Count(list.Text, "support-bot") != 1 {
		t.Fatalf("created twice: support-bot listed %d times, want 1:\n%s", strings.Count(list.Text, "support-bot"), list.Text)
	}
	if resp, body := e.postRaw("/v1/tools/create_principal", key, []byte(`{"name":"other"}`), "Idempotency-Key", "7f1d3c1e-create"); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("other body: %d %s, want %d", resp.StatusCode, body, http.StatusUnprocessableEntity)
	}
	// Read tools ignore the key.
	if resp, _ := e.postRaw("/v1/tools/list_principals", key, []byte(`{}`), "Idempotency-Key", "7f1d3c1e-create"); resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("read tool: status %d, Idempotent-Replayed %q; want 200 and no Idempotent-Replayed", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
}

func TestMalformedBurstLeavesNoGoroutines(t *testing.T) {
	// Not parallel: it measures the whole process (goroutines, open
	// files, the heap), so it runs while no other test does.
	e := newTestEnv(t, "http:\n  max_body_bytes: 1024\n  rate_per_minute: 100000\n  rate_burst: 100000\n")
	key := e.CreateKey("ops", "admin")
	e.Start()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	send := func(method, path, key string, body []byte, header ...string) {
		req, _ := http.NewRequest(method, e.URL+path, bytes.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s: status %d, want below 500", method, path, resp.StatusCode)
		}
	}
	raw := func(payload string) {
		c, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte(payload))
		if strings.HasSuffix(payload, "\r\n\r\n") {
			_, _ = io.Copy(io.Discard, c) // the server answers and closes
		}
		c.Close()
	}
	burst := func() {
		for i := 0; i < 20; i++ {
			send("POST", "/v1/tools/create_principal", key, []byte(`{"name":`))
			send("POST", "/v1/tools/create_principal", key, []byte(`[1,2,3]`))
			send("POST", "/v1/tools/create_principal", key, []byte("\xff\xfe"))
			send("POST", "/v1/tools/create_principal", key, bytes.Repeat([]byte("a"), 4096))
			send("POST", "/v1/tools/nope", "cs_sk_bogus", []byte(`{}`))
			send("POST", "/mcp", key, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_principal","arguments":{"name":5}}}`), "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
			send("POST", "/mcp", key, []byte(`{"jsonrpc":`), "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
			send("POST", "/mcp", key, bytes.Repeat([]byte("["), 2048), "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
			send("GET", "/mcp", key, nil, "Accept", "text/event-stream")
			send("DELETE", "/mcp", key, nil)
			raw("GARBAGE\r\n\r\n")
			raw("POST /v1/tools/x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n{") // body cut short
			raw("POST /mcp HTTP/1.1\r\nHost: ")                                        // headers cut short
		}
	}
	burst() // warm up whatever starts once
	// Polling while connections wind down; nothing here asserts speed.
	deadline := time.Now().Add(10 * time.Second)
	before, steady := runtime.NumGoroutine(), 0
	for steady < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if n := runtime.NumGoroutine(); n != before {
			before, steady = n, 0
		} else {
			steady++
		}
	}
	burst()
	after := runtime.NumGoroutine()
	for deadline = time.Now().Add(10 * time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(5 * time.Millisecond)
	}
	if after > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before the burst, %d after, want no more after\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "http:\n  metrics_token_env: METRICS_TOKEN\n")
	e.env["METRICS_TOKEN"] = "scrape-secret"
	key := e.CreateKey("ops", "admin")
	e.Start()
	scrape := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", e.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := scrape(""); code != http.StatusUnauthorized {
		t.Fatalf("no token: status %d, want %d", code, http.StatusUnauthorized)
	}
	value := func(body, series string) float64 {
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		return 0
	}
	_, before := scrape("scrape-secret")
	e.MustOK(key, "create_principal", map[string]any{"name": "bot"})
	e.Call(key, "create_principal", map[string]any{"name": "bad name"})
	e.Call("", "list_principals", nil)
	agent := e.MustOK(key, "create_principal", map[string]any{"name": "bot2", "role": "agent"}).Data["key"].(string)
	e.Call(agent, "list_principals", nil)
	code, after := scrape("scrape-secret")
	if code != 200 {
		t.Fatalf("scrape: status %d, want 200", code)
	}
	for _, c := range []struct {
		series string
		moved  float64
	}{
		{`countersign_tool_calls_total{outcome="ok",tool="create_principal"}`, 2},
		{`countersign_tool_calls_total{outcome="invalid",tool="create_principal"}`, 1},
		{`countersign_tool_calls_total{outcome="denied",tool="list_principals"}`, 1},
		{`countersign_tool_call_duration_seconds_count{tool="create_principal"}`, 3},
	} {
		if d := value(after, c.series) - value(before, c.series); d != c.moved {
			t.Fatalf("%s moved by %v, want %v\n%s", c.series, d, c.moved, after)
		}
	}
	for _, want := range []string{"countersign_store_readable 1", "countersign_sweeper_runs_total", "go_goroutines"} {
		if !strings.Contains(after, want) {
			t.Fatalf("no %s in\n%s", want, after)
		}
	}
	// Per-call logs carry request id, principal and tool, never the key.
	logs := e.logs.String()
	if !regexp.MustCompile(`msg="tool call" request_id=[0-9a-f]{16} principal="ops \[prin_[0-9a-f]+\]" surface=http tool=create_principal outcome=ok`).MatchString(logs) {
		t.Fatalf("no per-call log line matching %s:\n%s", `msg="tool call" request_id=[0-9a-f]{16} principal="ops \[prin_[0-9a-f]+\]" surface=http tool=create_principal outcome=ok`, logs)
	}
	if strings.Contains(logs, "cs_sk_") || strings.Contains(logs, "scrape-secret") {
		t.Fatalf("a secret reached the log, want no %q or %q in:\n%s", "cs_sk_", "scrape-secret", logs)
	}
}

func TestMetricsTokenEnvMustBeSet(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "http:\n  metrics_token_env: METRICS_TOKEN\n")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"serve", "--config", e.cfg}, e.getenv, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "http.metrics_token_env: the environment variable METRICS_TOKEN is empty or unset") {
		t.Fatalf("err = %v, want an error containing %q", err, "http.metrics_token_env: the environment variable METRICS_TOKEN is empty or unset")
	}
}

func TestShutdownFinishesAnInFlightCall(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	key := e.CreateKey("ops", "admin")
	e.Start()
	// A call whose handler is running, waiting for its body, when the
	// server is told to stop: with Expect: 100-continue the server says
	// "100 Continue" once the handler reads the body.
	body := `{"name":"late-bot","role":"agent"}`
	c, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/tools/create_principal HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		strings.TrimPrefix(e.URL, "http://"), key, len(body))
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("100 Continue: %v %v, want status %d", resp, err, http.StatusContinue)
	}
	e.cancel()
	pollUntil(t, func() bool { return strings.Contains(e.logs.String(), "shutting down") })
	// Intake is closed to new connections...
	pollUntil(t, func() bool {
		nc, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	// ...but the call in flight completes, and is committed.
	if _, err := io.WriteString(c, body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "'late-bot' (role: agent, kind: agent)") {
		t.Fatalf("in-flight call: %d %s, want 200 and %q", resp.StatusCode, b, "'late-bot' (role: agent, kind: agent)")
	}
	if err := <-e.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	e.cancel = nil
	logs := e.logs.String()
	if !strings.Contains(logs, "msg=stopped") {
		t.Fatalf("no clean stop, want %q in:\n%s", "msg=stopped", logs)
	}
	// The store was closed cleanly, with the call in it.
	out, err := e.runCmd("audit", "export", "--config", e.cfg)
	if err != nil || !strings.Contains(out, `\"late-bot\"`) {
		t.Fatalf("after restart: %v, want an export containing %s:\n%s", err, `\"late-bot\"`, out)
	}
}

// pollUntil polls cond until it holds, for an asynchronous event; it never
// asserts how long the event took.
func pollUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSlowHeadersAreCutOff(t *testing.T) {
	t.Parallel()
	// read_header_timeout is applied: a client that never finishes its
	// headers is disconnected instead of holding a connection forever.
	e := newTestEnv(t, "http:\n  read_header_timeout: 200ms\n")
	e.Start()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /v1/tools/x HTTP/1.1\r\nHost: a\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a safety net, far above the timeout
	_, err = io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a connection with unfinished headers open")
	}
}
