package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/config"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpPost posts one raw JSON-RPC body to /mcp with key.
func (e *testEnv) mcpPost(key, body string) (*http.Response, string) {
	e.t.Helper()
	return e.postRaw("/mcp", key, []byte(body), "Accept", "application/json, text/event-stream")
}

func rememberMsg(id int, subject string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"remember","arguments":{"user_id":"p1","subject":%q,"value":"v"}}}`, id, subject)
}

// TestMCPBatchIsRefusedAndRunsNoWrites plays issue 9's attack: one POST
// carrying 500 tools/call remember messages ran 500 writes under a burst of
// 60. A batch is now refused whole (HTTP 400, JSON-RPC -32600) and writes
// nothing, whatever protocol version the client declares.
func TestMCPBatchIsRefusedAndRunsNoWrites(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "http:\n  rate_per_minute: 6000\n  rate_burst: 1000\n")
	key := e.CreateKey("agent", "member", "--kind", "agent")
	e.Start()
	msgs := make([]string, 500)
	for i := range msgs {
		msgs[i] = rememberMsg(i+1, fmt.Sprintf("batch_subject_%d", i))
	}
	batch := "[" + strings.Join(msgs, ",") + "]"
	for _, version := range []string{"", "2025-03-26", "2025-06-18"} {
		req := []string{"Accept", "application/json, text/event-stream"}
		if version != "" {
			req = append(req, "Mcp-Protocol-Version", version)
		}
		resp, body := e.postRaw("/mcp", key, []byte("  \n"+batch), req...)
		var rpc struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &rpc) != nil || rpc.Error.Code != -32600 || !strings.Contains(rpc.Error.Message, "batches are not supported") {
			t.Fatalf("version %q: %d %s, want %d and JSON-RPC error %d containing %q", version, resp.StatusCode, body, http.StatusBadRequest, -32600, "batches are not supported")
		}
	}
	// A batch of one is a batch too.
	if resp, body := e.mcpPost(key, "["+rememberMsg(1, "single_in_batch")+"]"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("batch of one: %d %s, want %d", resp.StatusCode, body, http.StatusBadRequest)
	}
	r := e.MustOK(key, "list_memories", map[string]any{"user_id": "p1"})
	if strings.Contains(r.Raw, "batch_subject_") || strings.Contains(r.Raw, "single_in_batch") {
		t.Fatalf("a refused batch wrote, want no %q or %q in: %s", "batch_subject_", "single_in_batch", r.Raw)
	}
	// One message per POST still works.
	if resp, body := e.mcpPost(key, rememberMsg(7, "one_by_one")); resp.StatusCode != 200 || strings.Contains(body, `"isError":true`) {
		t.Fatalf("single message: %d %s, want 200 and no %s", resp.StatusCode, body, `"isError":true`)
	}
	if r := e.MustOK(key, "list_memories", map[string]any{"user_id": "p1"}); !strings.Contains(r.Raw, "one_by_one") {
		t.Fatalf("single message did not write, want %q in: %s", "one_by_one", r.Raw)
	}
}

// TestRateLimitCountsToolCallsOnEverySurface: one token per tool call,
// whether it comes over HTTP or MCP, from one bucket per principal; beyond
// the burst every surface answers 429 with Retry-After. Before, MCP took
// one token per HTTP request, whatever it carried.
func TestRateLimitCountsToolCallsOnEverySurface(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "http:\n  rate_per_minute: 1\n  rate_burst: 4\n")
	a := e.CreateKey("a", "viewer")
	b := e.CreateKey("b", "viewer")
	e.Start()
	e.MustOK(a, "export_public_key", nil)
	e.MustOK(a, "export_public_key", nil)
	for i := 0; i < 2; i++ {
		resp, body := e.mcpPost(a, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"export_public_key","arguments":{}}}`)
		if resp.StatusCode != 200 || strings.Contains(body, `"isError":true`) {
			t.Fatalf("mcp call %d: %d %s, want 200 and no %s", i, resp.StatusCode, body, `"isError":true`)
		}
	}
	// The bucket of a is empty: HTTP and MCP both refuse with 429.
	resp, body := e.postRaw("/v1/tools/export_public_key", a, []byte(`{}`))
	if secs, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || secs < 1 || !strings.Contains(body, "rate limit exceeded") {
		t.Fatalf("http beyond the burst: %d, Retry-After %q, %s; want %d, Retry-After >= 1 and %q", resp.StatusCode, resp.Header.Get("Retry-After"), body, http.StatusTooManyRequests, "rate limit exceeded")
	}
	resp, body = e.mcpPost(a, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"remember","arguments":{"subject":"x","value":"y"}}}`)
	var rpc struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if secs, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || secs < 1 ||
		json.Unmarshal([]byte(body), &rpc) != nil || rpc.ID != 9 || !strings.Contains(rpc.Error.Message, "rate limit exceeded") {
		t.Fatalf("mcp beyond the burst: %d, Retry-After %q, %s; want %d, Retry-After >= 1 and id 9 with an error containing %q", resp.StatusCode, resp.Header.Get("Retry-After"), body, http.StatusTooManyRequests, "rate limit exceeded")
	}
	// Another principal has its own bucket.
	e.MustOK(b, "export_public_key", nil)
}

// TestMCPHandshakeTakesNoRateToken is issue 14's item 5: initialize,
// notifications/initialized, tools/list and ping took tokens from the
// burst, so an agent could be refused while connecting. With a burst of 2,
// a client connects, lists the tools and pings many times, then makes its
// two tool calls; the third is refused.
func TestMCPHandshakeTakesNoRateToken(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "http:\n  rate_per_minute: 1\n  rate_burst: 2\n")
	key := e.CreateKey("agent", "viewer")
	e.Start()
	for i := 0; i < 3; i++ {
		cs := e.mcpSession(key) // initialize + notifications/initialized
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("tools/list %d: %v", i, err)
		}
		if resp, body := e.mcpPost(key, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 200 {
			t.Fatalf("ping %d: %d %s, want 200", i, resp.StatusCode, body)
		}
		cs.Close()
	}
	cs := e.mcpSession(key)
	mcpOK(t, cs, "export_public_key", map[string]any{})
	mcpOK(t, cs, "export_public_key", map[string]any{})
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "export_public_key", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("third tool call: err = %v, want an error containing %q", err, "Too Many Requests")
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("tools/list with an empty bucket: %v", err)
	}
	// Protocol messages have a bucket of their own, ten times the tool
	// calls' (a burst of 20 here): a flood of pings is cut too.
	limited := 0
	for i := 0; i < 30 && limited == 0; i++ {
		resp, body := e.mcpPost(key, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
		if resp.StatusCode == http.StatusTooManyRequests {
			if !strings.Contains(body, `"id":5`) || !strings.Contains(body, "rate limit exceeded") || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("limited ping: %s, Retry-After %q; want %s, %q and a Retry-After", body, resp.Header.Get("Retry-After"), `"id":5`, "rate limit exceeded")
			}
			limited = i + 1
		}
	}
	if limited == 0 {
		t.Fatal("30 pings on top of the handshakes were never limited")
	}
}

// TestRateLimitOverStdioMCP: the stdio surface (no HTTP in front) pays in
// bot.Call, one token per tool call; beyond the burst the call is a tool
// error saying when to retry.
func TestRateLimitOverStdioMCP(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "http:\n  rate_per_minute: 1\n  rate_burst: 2\n")
	cs, stop := e.runMCP([]string{"--local-agent"}, nil)
	defer stop()
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	mcpOK(t, cs, "export_public_key", map[string]any{})
	mcpOK(t, cs, "export_public_key", map[string]any{})
	text, r := mcpCall(t, cs, "export_public_key", map[string]any{})
	if !r.IsError || !strings.HasPrefix(text, "rate limit exceeded: retry after ") {
		t.Fatalf("third call over stdio: IsError = %v, text = %q; want an error with prefix %q", r.IsError, text, "rate limit exceeded: retry after ")
	}
}

// TestListingsAreBoundedAndPaged: 200 list_memories calls in one request
// built a 228 MB answer. Batches are refused (above); every listing has a
// limit with a default and a maximum, and next_cursor walks the rest.
func TestListingsAreBoundedAndPaged(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "http:\n  rate_per_minute: 60000\n  rate_burst: 10000\n")
	key := e.CreateKey("ops", "admin")
	e.Start()
	const n = 230
	for i := 0; i < n; i++ {
		e.MustOK(key, "remember", map[string]any{"user_id": "p1", "subject": fmt.Sprintf("note_%03d", i), "value": strings.Repeat("x", 40)})
	}
	// A batch of list calls is refused whole.
	calls := make([]string, 200)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_memories","arguments":{"user_id":"p1"}}}`, i)
	}
	if resp, body := e.mcpPost(key, "["+strings.Join(calls, ",")+"]"); resp.StatusCode != http.StatusBadRequest || len(body) > 1024 {
		t.Fatalf("batch of lists: %d, %d bytes; want %d in at most 1024 bytes", resp.StatusCode, len(body), http.StatusBadRequest)
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		args := map[string]any{"user_id": "p1"}
		if cursor != "" {
			args["cursor"] = cursor
		}
		r := e.MustOK(key, "list_memories", args)
		pages++
		active := r.Data["active"].([]any)
		if len(active) > 100 {
			t.Fatalf("page %d has %d facts; the default limit is 100", pages, len(active))
		}
		for _, f := range active {
			s := f.(map[string]any)["subject"].(string)
			if seen[s] {
				t.Fatalf("%s listed twice, want once", s)
			}
			seen[s] = true
		}
		cursor = r.Data["next_cursor"].(string)
		if cursor == "" {
			break
		}
		if !strings.Contains(r.Text, `… more: call list_memories again with cursor "`+cursor+`"`) {
			t.Fatalf("page %d text does not say how to go on, want %q in: %q", pages, `… more: call list_memories again with cursor "`+cursor+`"`, r.Text[len(r.Text)-80:])
		}
	}
	if len(seen) != n || pages != 3 {
		t.Fatalf("walked %d facts in %d pages, want %d in 3", len(seen), pages, n)
	}
	for _, bad := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"list_memories", map[string]any{"user_id": "p1", "limit": 501}, "limit"},
		{"list_memories", map[string]any{"user_id": "p1", "limit": 0}, "limit"},
		{"list_memories", map[string]any{"user_id": "p1", "cursor": "abc"}, "cursor"},
		{"history", map[string]any{"user_id": "p1", "subject": "note_001", "limit": 100000}, "limit"},
		{"pending_changes", map[string]any{"user_id": "p1", "limit": 501}, "limit"},
		{"audit_log", map[string]any{"limit": 1001}, "limit"},
		{"audit_log", map[string]any{"cursor": "-3"}, "cursor"},
		{"recall", map[string]any{"user_id": "p1", "question": "note", "limit": 0}, "limit"},
	} {
		if r := e.Call(key, bad.tool, bad.args); r.Status != 400 || r.Field != bad.field {
			t.Fatalf("%s %v: %d %s, want 400 on field %q", bad.tool, bad.args, r.Status, r.Raw, bad.field)
		}
	}
	// audit_log pages the same way, newest first, without overlap.
	r := e.MustOK(key, "audit_log", map[string]any{"limit": 100})
	first := r.Data["entries"].([]any)
	next := r.Data["next_cursor"].(string)
	if len(first) != 100 || next == "" {
		t.Fatalf("audit_log page 1: %d entries, cursor %q; want 100 entries and a cursor", len(first), next)
	}
	r = e.MustOK(key, "audit_log", map[string]any{"limit": 100, "cursor": next})
	second := r.Data["entries"].([]any)
	lastSeq := first[len(first)-1].(map[string]any)["seq"].(float64)
	if len(second) == 0 || second[0].(map[string]any)["seq"].(float64) >= lastSeq {
		t.Fatalf("audit_log page 2 starts at %v, want a seq below page 1's last %v", second[0], lastSeq)
	}
	// recall's limit narrows the ranked context, never widens it.
	r = e.MustOK(key, "recall", map[string]any{"user_id": "p1", "question": "note x", "limit": 5})
	if facts := r.Data["facts"].([]any); len(facts) > 5 {
		t.Fatalf("recall limit 5 returned %d facts, want at most 5", len(facts))
	}
}

// TestLargeArgumentsAreRefusedAndTheHeapStaysSmall plays issue 9's attack:
// 40 concurrent confirm_action calls with 1 MiB of arguments took the
// process from 16 MiB to 3.7 GB, never released. arguments and dry_run are
// bounded (64 KiB of JSON by default) before they are decoded; each call is
// refused with 413 naming the argument and the limit, and after a
// collection the heap is within 16 MiB of where it started.
func TestLargeArgumentsAreRefusedAndTheHeapStaysSmall(t *testing.T) {
	// Not parallel: it measures the whole process (goroutines, open
	// files, the heap), so it runs while no other test does.
	e := newTestEnv(t, "http:\n  rate_per_minute: 60000\n  rate_burst: 1000\n")
	key := e.CreateKey("agent", "member", "--kind", "agent")
	e.Start()
	const calls = 40
	// A small call first, so that lazily built state is not counted.
	e.MustOK(key, "confirm_action", map[string]any{"tool": "bulk_import", "arguments": map[string]any{"n": 1}})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	big := strings.Repeat("a", 1<<20-200) // the body stays under http.max_body_bytes
	bodies := make([][]byte, calls)
	for i := range bodies {
		field := "arguments"
		v := `{"blob":"` + big + `"}`
		if i%2 == 1 {
			field, v = "dry_run", `"`+big+`"`
		}
		bodies[i] = []byte(fmt.Sprintf(`{"tool":"bulk_import","summary":"import","%s":%s}`, field, v))
	}
	var built runtime.MemStats
	runtime.ReadMemStats(&built)

	type answer struct {
		status int
		body   string
	}
	answers := make(chan answer, calls)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", e.URL+"/v1/tools/confirm_action", bytes.NewReader(bodies[i]))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{0, err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, string(b)}
		}()
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.status != http.StatusRequestEntityTooLarge || !strings.Contains(a.body, "the limit is 65536 bytes") ||
			!(strings.Contains(a.body, `"field":"arguments"`) && strings.Contains(a.body, "limits.max_arguments_bytes") ||
				strings.Contains(a.body, `"field":"dry_run"`) && strings.Contains(a.body, "limits.max_dry_run_bytes")) {
			t.Fatalf("a 1 MiB argument: %d %.300s; want %d, %q and the field with its limits key", a.status, a.body, http.StatusRequestEntityTooLarge, "the limit is 65536 bytes")
		}
	}
	bodies = nil
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	allocated := after.TotalAlloc - built.TotalAlloc
	t.Logf("heap after GC: %d KiB (was %d KiB); allocated during the burst: %d MiB for %d MiB sent", after.HeapAlloc>>10, before.HeapAlloc>>10, allocated>>20, calls)
	if grew > 16<<20 {
		t.Fatalf("the heap grew by %d MiB after the refused calls; the bound is 16 MiB", grew>>20)
	}
	// Each body is read once, into a buffer of its size, and its large
	// argument is never decoded: under two bytes allocated per byte sent.
	if allocated > 2*calls<<20 {
		t.Fatalf("the burst allocated %d MiB for %d MiB sent; the bound is twice what was sent", allocated>>20, calls)
	}
	// Nothing was stored: the requests list holds only the small call.
	r := e.MustOK(key, "audit_log", map[string]any{"limit": 1000, "user_id": "default"})
	if strings.Contains(r.Raw, "aaaaaaaaaaaaaaaa") {
		t.Fatal("a refused argument reached the audit log")
	}
}

// TestMemoryLimitFromConfig: serve applies limits.memory_limit as the
// runtime's soft limit, unless GOMEMLIMIT is set in its environment; a
// value that is not a size is refused at load, naming the key.
func TestMemoryLimitFromConfig(t *testing.T) {
	// Not parallel: the memory limit is the process's, and every server a
	// test starts sets it.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	e := newTestEnv(t, "limits:\n  memory_limit: 300MiB\n")
	e.Start()
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Fatalf("memory limit %d, want 300 MiB", got)
	}
	if !strings.Contains(e.logs.String(), "msg=\"memory limit\" bytes=314572800 from=limits.memory_limit") {
		t.Fatalf("start log lacks %s:\n%s", `msg="memory limit" bytes=314572800 from=limits.memory_limit`, e.logs.String())
	}
	e.Stop()
	debug.SetMemoryLimit(123 << 20)
	e.env["GOMEMLIMIT"] = "123MiB"
	e.Start()
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Fatalf("with GOMEMLIMIT set, the limit became %d, want %d (GOMEMLIMIT=123MiB)", got, 123<<20)
	}
	e.Stop()
	for _, bad := range []string{"lots", "1MiB", "-5GiB"} {
		_, err := loadConfigText(t, "limits:\n  memory_limit: "+bad+"\n  max_arguments_bytes: 10\n")
		if err == nil || !strings.Contains(err.Error(), "limits.memory_limit: ") || !strings.Contains(err.Error(), "limits.max_arguments_bytes: must be at least 256") {
			t.Fatalf("memory_limit %s: err = %v, want an error containing %q and %q", bad, err, "limits.memory_limit: ", "limits.max_arguments_bytes: must be at least 256")
		}
	}
}

func loadConfigText(t *testing.T, text string) (*config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(path)
}

// TestStrictArgumentsOverHTTP is issue 14's item 6: a duplicate key (at
// any depth) is refused naming it, a negative id says it must be positive,
// and confirm_action's schema admits the dry_run values the server takes.
func TestStrictArgumentsOverHTTP(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	key := e.CreateKey("agent", "member", "--kind", "agent")
	e.Start()
	for _, c := range []struct{ tool, body, field string }{
		{"remember", `{"subject":"allergy","value":"none","value":"penicillin"}`, "value"},
		{"remember", `{"subject":"allergy","\u0076alue":"none","value":"penicillin"}`, "value"},
		{"confirm_action", `{"tool":"deploy","arguments":{"env":"staging","env":"prod"}}`, "arguments.env"},
	} {
		r := e.Call(key, c.tool, c.body)
		if r.Status != 400 || r.Field != c.field || !strings.Contains(r.Error, "is given more than once") {
			t.Fatalf("%s: %d %s, want 400 on field %q containing %q", c.body, r.Status, r.Raw, c.field, "is given more than once")
		}
	}
	r := e.Call(key, "get_memory", `{"memory_id":-1}`)
	if r.Status != 400 || r.Error != "memory_id: must be a positive integer, not -1" {
		t.Fatalf("memory_id -1: %d %s, want 400 and error %q", r.Status, r.Raw, "memory_id: must be a positive integer, not -1")
	}
	// dry_run: any JSON value, and the schema says so.
	e.MustOK(key, "confirm_action", map[string]any{"tool": "deploy", "summary": "s", "dry_run": map[string]any{"steps": []int{1, 2}}})
	resp, body := e.get("/v1/tools")
	var list struct {
		Tools []struct {
			Name   string `json:"name"`
			Schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"input_schema"`
		} `json:"tools"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("tools: %d %s, want 200 and JSON", resp.StatusCode, body)
	}
	for _, tl := range list.Tools {
		if tl.Name == "confirm_action" {
			got := string(tl.Schema.Properties["dry_run"])
			if !strings.Contains(got, `"type":["string","object","array","number","boolean","null"]`) || !strings.Contains(got, "dry-run plan") {
				t.Fatalf("dry_run schema = %s, want it to contain %s and %q", got, `"type":["string","object","array","number","boolean","null"]`, "dry-run plan")
			}
			return
		}
	}
	t.Fatal("confirm_action not listed")
}

// get fetches path without a key.
func (e *testEnv) get(path string) (*http.Response, string) {
	e.t.Helper()
	resp, err := http.Get(e.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestInvisibleAndCompatibilitySubjects plays issue 9's item 9:
// "active_medication\u200b" was stored as a subject of its own that looks
// exactly like the declared slot, so its changes skipped the confirm gate.
// It is now refused naming the field; a fullwidth form of the slot's name
// (NFKC) folds onto the slot, and a replacement through it is held for a
// person like any other.
func TestInvisibleAndCompatibilitySubjects(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, memoryConfig)
	agent := e.CreateKey("agent", "member", "--kind", "agent")
	e.Start()
	p := func(kv ...string) map[string]any {
		m := map[string]any{"user_id": "patient_7"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	e.MustOK(agent, "remember", p("subject", "active_medication", "value", "warfarin 5mg daily"))
	for _, subject := range []string{"active_medication\u200b", "active\u200d_medication", "\u202eactive_medication", "active_medication\ufeff"} {
		r := e.Call(agent, "remember", p("subject", subject, "value", "apixaban 5mg twice daily"))
		if r.Status != 400 || r.Field != "subject" || !strings.Contains(r.Error, "must not contain invisible characters") {
			t.Fatalf("subject %q: %d %s, want 400 on field subject containing %q", subject, r.Status, r.Raw, "must not contain invisible characters")
		}
	}
	if r := e.Call(agent, "remember", p("subject", "allergy", "value", "none", "scope", "web\u200b")); r.Status != 400 || r.Field != "scope" {
		t.Fatalf("scope with a zero-width space: %d %s, want 400 on field scope", r.Status, r.Raw)
	}
	// Fullwidth letters and low line: the declared slot, gated.
	r := e.MustOK(agent, "remember", p("subject", "ａｃｔｉｖｅ＿ｍｅｄｉｃａｔｉｏｎ", "value", "apixaban 5mg twice daily", "replaces", "warfarin"))
	if r.Text != "Stored: [FLAG] active_medication = apixaban 5mg twice daily" || r.Data["pending"] != true {
		t.Fatalf("fullwidth subject: %s, want text %q and pending true", r.Raw, "Stored: [FLAG] active_medication = apixaban 5mg twice daily")
	}
	// An alias in fullwidth letters too.
	if r := e.MustOK(agent, "forget", p("subject", "ＭＥＤＳ", "value", "warfarin")); r.Text != "Stored: [FLAG] active_medication = warfarin 5mg daily" {
		t.Fatalf("fullwidth alias: %s, want text %q", r.Raw, "Stored: [FLAG] active_medication = warfarin 5mg daily")
	}
	list := e.MustOK(agent, "list_memories", p())
	if !strings.Contains(list.Text, "• active_medication = warfarin 5mg daily") || strings.Contains(list.Text, "\u200b") {
		t.Fatalf("list after the attempts = %q, want %q in it and no U+200B", list.Text, "• active_medication = warfarin 5mg daily")
	}
}

// rawReceiver records every callback as it arrived and answers 200.
type rawReceiver struct {
	mu   sync.Mutex
	hits []rawHit
}

type rawHit struct {
	header http.Header
	body   []byte
}

func (rr *rawReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rr.mu.Lock()
	rr.hits = append(rr.hits, rawHit{r.Header.Clone(), body})
	rr.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (rr *rawReceiver) got() []rawHit {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return append([]rawHit(nil), rr.hits...)
}

// TestCallbacksSignedPerPrincipalAndMatchedByPort plays issue 9's item 7:
// every agent shared one callback secret, so agent A could sign an
// "approved" callback that agent B's receiver accepted; and an allowed host
// allowed every port. Each principal now has its own secret and B's
// callbacks are signed with B's; a callback to another port of the allowed
// host:port is refused; an allowlist entry that can never match stops the
// config from loading.
func TestCallbacksSignedPerPrincipalAndMatchedByPort(t *testing.T) {
	t.Parallel()
	rr := &rawReceiver{}
	srv := httptest.NewServer(rr)
	defer srv.Close()
	e := newTestEnv(t, actConfig(srv)) // no callbacks.secret_env value: only per-principal secrets
	admin := e.CreateKey("ops", "admin")
	e.Start()
	secretOf := func(r toolResponse) []byte {
		s, _ := r.Data["callback_secret"].(string)
		b, err := actiontools.ParseSecret(s)
		if err != nil || !strings.HasPrefix(s, "whsec_") || !strings.Contains(r.Text, s) {
			t.Fatalf("create_principal: %s, want a whsec_ callback_secret that parses and is shown in the text", r.Raw)
		}
		return b
	}
	keyOf := func(r toolResponse) string { return r.Data["key"].(string) }
	ra := e.MustOK(admin, "create_principal", map[string]any{"name": "agent_a", "role": "agent"})
	rb := e.MustOK(admin, "create_principal", map[string]any{"name": "agent_b", "role": "agent"})
	alice := keyOf(e.MustOK(admin, "create_principal", map[string]any{"name": "alice", "role": "member"}))
	secretA, secretB := secretOf(ra), secretOf(rb)

	// Another port of the allowed host, or no port (80), is refused.
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	for _, u := range []string{fmt.Sprintf("http://127.0.0.1:%d/b", n+1), "http://127.0.0.1/b", "http://localhost:" + port + "/b"} {
		r := e.Call(keyOf(rb), "confirm_action", actDelete(u))
		if r.Status != 400 || r.Field != "callback_url" || !strings.Contains(r.Error, "scheme, host and port") {
			t.Fatalf("callback to %s: %d %s, want 400 on field callback_url containing %q", u, r.Status, r.Raw, "scheme, host and port")
		}
	}

	r := e.MustOK(keyOf(rb), "confirm_action", actDelete(srv.URL+"/b"))
	e.MustOK(alice, "approve_action", map[string]any{"request_id": r.Data["request_id"]})
	actWait(t, "B's callback", func() bool { return len(rr.got()) >= 1 })
	hit := rr.got()[0]
	if err := actiontools.Verify(secretB, hit.header, hit.body, time.Now(), 0); err != nil {
		t.Fatalf("B's callback does not verify with B's secret: %v", err)
	}
	if err := actiontools.Verify(secretA, hit.header, hit.body, time.Now(), 0); err == nil {
		t.Fatal("B's callback verifies with A's secret")
	}
	// A forges an approval for B's receiver with what A holds: its own key
	// and secret. B's check refuses it.
	forged := http.Header{}
	ts := time.Now().Unix()
	forged.Set(actiontools.HeaderID, hit.header.Get(actiontools.HeaderID)+"_forged")
	forged.Set(actiontools.HeaderTimestamp, strconv.FormatInt(ts, 10))
	forged.Set(actiontools.HeaderSignature, actiontools.Sign(secretA, forged.Get(actiontools.HeaderID), ts, hit.body))
	if err := actiontools.Verify(secretB, forged, hit.body, time.Now(), 0); err != actiontools.ErrSignature {
		t.Fatalf("A's forgery against B's secret: err = %v, want %v", err, actiontools.ErrSignature)
	}

	// Rotation: a new secret, shown once; the old one stops verifying the
	// next callback.
	rot := e.MustOK(admin, "rotate_callback_secret", map[string]any{"name": "agent_b"})
	newB := secretOf(rot)
	r = e.MustOK(keyOf(rb), "confirm_action", actDelete(srv.URL+"/b"))
	e.MustOK(alice, "approve_action", map[string]any{"request_id": r.Data["request_id"]})
	actWait(t, "B's second callback", func() bool { return len(rr.got()) >= 2 })
	hit = rr.got()[1]
	if actiontools.Verify(newB, hit.header, hit.body, time.Now(), 0) != nil || actiontools.Verify(secretB, hit.header, hit.body, time.Now(), 0) == nil {
		t.Fatal("after rotation the callback must verify with the new secret only")
	}

	for _, bad := range []string{"127.0.0.1:99999", "agent.example/cb", "ftp://agent.example/", "*.example", "https://u:p@agent.example/"} {
		_, err := loadConfigText(t, "callbacks:\n  allowed_hosts: [\""+bad+"\"]\n")
		if err == nil || !strings.Contains(err.Error(), "callbacks.allowed_hosts[0]: ") {
			t.Fatalf("allowed_hosts %q: err = %v, want an error containing %q", bad, err, "callbacks.allowed_hosts[0]: ")
		}
	}
}
