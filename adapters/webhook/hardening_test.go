package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/countersign/countersign/bot/bottest"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeApp authenticates "key-<name>" as principal <name> and runs a few
// tools: "write" counts its runs, "read" changes nothing, "slow" waits until
// released, "bad" answers 400, "broken" fails with an internal error.
type fakeApp struct {
	writes  atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func newFakeApp() *fakeApp {
	return &fakeApp{entered: make(chan struct{}, 10), release: make(chan struct{})}
}

func (f *fakeApp) Authenticate(_ context.Context, key string) (*bot.Caller, error) {
	name, ok := strings.CutPrefix(key, "key-")
	if !ok {
		return nil, bot.Errorf(bot.KindUnauthenticated, "Access denied: unknown or revoked API key.")
	}
	return &bot.Caller{Principal: bot.Principal{ID: "prin_" + name, Name: name, Role: policy.RoleAdmin}}, nil
}

func (f *fakeApp) Call(ctx context.Context, c *bot.Caller, tool string, args []byte) (bot.Result, error) {
	switch tool {
	case "write":
		n := f.writes.Add(1)
		return bot.Result{Text: fmt.Sprintf("write #%d by %s", n, c), Data: map[string]any{"n": n, "args": json.RawMessage(args)}}, nil
	case "read":
		return bot.Result{Text: "read"}, nil
	case "slow":
		f.entered <- struct{}{}
		<-f.release
		return bot.Result{Text: "slow done"}, nil
	case "bad":
		return bot.Result{}, bot.Invalid("x", "is wrong")
	case "broken":
		return bot.Result{}, errors.New("disk on fire at /var/lib/secret")
	case "key":
		return bot.Result{Text: "  API key (shown once — save it now):\n  cs_sk_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG\n  whsec_QC/YwHtLRbRcWmf5IeeuR+GHsm+MqLL8ktg63a9zZJw="}, nil
	}
	return bot.Result{}, bot.Errorf(bot.KindNotFound, "unknown tool '%s'", tool)
}

func (f *fakeApp) Tools() []bot.ToolInfo { return nil }

func isWrite(tool string) bool { return tool != "read" }

func newClock() *bottest.Clock {
	return bottest.NewClock(time.Date(2026, 9, 26, 12, 0, 0, 0, time.UTC))
}

func openDB(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "cs.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

type answer struct {
	Status int
	Header http.Header
	Body   string
}

func post(t *testing.T, url, key, body string, header ...string) answer {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func TestRateLimitAnswers429WithRetryAfter(t *testing.T) {
	clk := newClock()
	app := newFakeApp()
	l := bot.NewRateLimiter(30, 2, clk.Now) // one every 2 s
	srv := httptest.NewServer(NewServer(Options{App: app, Middleware: []func(http.Handler) http.Handler{ChargeCalls(l, nil, nil)}}))
	defer srv.Close()
	url := srv.URL + "/v1/tools/read"
	for i := 0; i < 2; i++ {
		if a := post(t, url, "key-a", `{}`); a.Status != 200 {
			t.Fatalf("call %d = %+v, want status 200", i, a)
		}
	}
	a := post(t, url, "key-a", `{}`)
	if a.Status != http.StatusTooManyRequests || a.Header.Get("Retry-After") != "2" || !strings.Contains(a.Body, "rate limit exceeded") || a.Header.Get("X-Request-ID") == "" {
		t.Fatalf("limited = %+v, want status %d, Retry-After 2, an X-Request-ID and a body containing %q", a, http.StatusTooManyRequests, "rate limit exceeded")
	}
	if a := post(t, url, "key-b", `{}`); a.Status != 200 {
		t.Fatalf("another principal = %+v, want status 200", a)
	}
	clk.Advance(2 * time.Second)
	if a := post(t, url, "key-a", `{}`); a.Status != 200 {
		t.Fatalf("after the wait = %+v, want status 200", a)
	}
}

func TestBodyLimit(t *testing.T) {
	app := newFakeApp()
	mount := LimitBody(2048, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		writeJSON(w, 200, map[string]int{"read": len(b)})
	}))
	srv := httptest.NewServer(NewServer(Options{App: app, MaxBody: 2048, Mounts: map[string]http.Handler{"POST /mcp": mount}}))
	defer srv.Close()
	big := `{"x":"` + strings.Repeat("a", 4096) + `"}`
	for _, path := range []string{"/v1/tools/write", "/mcp"} {
		a := post(t, srv.URL+path, "key-a", big)
		if a.Status != http.StatusRequestEntityTooLarge || !strings.Contains(a.Body, "request body too large: the limit is 2048 bytes") {
			t.Fatalf("%s = %+v, want status %d and a body containing %q", path, a, http.StatusRequestEntityTooLarge, "request body too large: the limit is 2048 bytes")
		}
	}
	if a := post(t, srv.URL+"/mcp", "key-a", `{"x":1}`); a.Status != 200 || !strings.Contains(a.Body, `"read":7`) {
		t.Fatalf("small body = %+v, want status 200 and a body containing %s", a, `"read":7`)
	}
	if n := app.writes.Load(); n != 0 {
		t.Fatalf("a too-large call ran %d times, want 0", n)
	}
}

func idemServer(t *testing.T, app *fakeApp, clk *bottest.Clock) (*httptest.Server, *Idempotency, *bolt.DB) {
	t.Helper()
	db := openDB(t)
	idem := NewIdempotency(IdempotencyOptions{Store: db, Now: clk.Now, IsWrite: isWrite, MaxBody: 1 << 16})
	srv := httptest.NewServer(NewServer(Options{App: app, Middleware: []func(http.Handler) http.Handler{idem.Middleware}}))
	t.Cleanup(srv.Close)
	return srv, idem, db
}

func TestIdempotencyReplaysAndRefuses(t *testing.T) {
	app := newFakeApp()
	clk := newClock()
	srv, idem, db := idemServer(t, app, clk)
	url := srv.URL + "/v1/tools/"

	first := post(t, url+"write", "key-a", `{"a":1,"b":[1,2]}`, "Idempotency-Key", "k1")
	if first.Status != 200 || !strings.Contains(first.Body, "write #1") {
		t.Fatalf("first = %+v, want status 200 and a body containing %q", first, "write #1")
	}
	// Same key, same arguments (even re-encoded): the first answer, not a second run.
	for _, body := range []string{`{"a":1,"b":[1,2]}`, "{ \"b\": [1, 2], \"a\": 1 }"} {
		again := post(t, url+"write", "key-a", body, "Idempotency-Key", `"k1"`)
		if again.Status != 200 || again.Body != first.Body || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay of %s = %+v, want status 200, the first body %q and Idempotent-Replayed true", body, again, first.Body)
		}
	}
	// Same key, other arguments: 422, nothing run.
	if a := post(t, url+"write", "key-a", `{"a":2}`, "Idempotency-Key", "k1"); a.Status != http.StatusUnprocessableEntity || !strings.Contains(a.Body, "already used with other arguments") {
		t.Fatalf("other body = %+v, want status %d and a body containing %q", a, http.StatusUnprocessableEntity, "already used with other arguments")
	}
	// Same key on another tool is another request too.
	if a := post(t, url+"key", "key-a", `{"a":1,"b":[1,2]}`, "Idempotency-Key", "k1"); a.Status != http.StatusUnprocessableEntity {
		t.Fatalf("other tool = %+v, want status %d", a, http.StatusUnprocessableEntity)
	}
	// Keys are per principal.
	if a := post(t, url+"write", "key-b", `{"a":1,"b":[1,2]}`, "Idempotency-Key", "k1"); a.Status != 200 || !strings.Contains(a.Body, "write #2") {
		t.Fatalf("other principal = %+v, want status 200 and a body containing %q", a, "write #2")
	}
	// Read tools ignore the header.
	for i := 0; i < 2; i++ {
		if a := post(t, url+"read", "key-a", fmt.Sprintf(`{"i":%d}`, i), "Idempotency-Key", "k1"); a.Status != 200 || a.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("read = %+v, want status 200 and no Idempotent-Replayed", a)
		}
	}
	// A bad key is a 400 naming the header.
	if a := post(t, url+"write", "key-a", `{}`, "Idempotency-Key", strings.Repeat("x", 256)); a.Status != 400 || !strings.Contains(a.Body, "Idempotency-Key") {
		t.Fatalf("long key = %+v, want status 400 and a body naming %q", a, "Idempotency-Key")
	}
	// A 400 is not kept: the corrected request runs under the same key.
	if a := post(t, url+"bad", "key-a", `{"x":0}`, "Idempotency-Key", "k2"); a.Status != 400 {
		t.Fatalf("bad = %+v, want status 400", a)
	}
	if a := post(t, url+"bad", "key-a", `{"x":1}`, "Idempotency-Key", "k2"); a.Status != 400 {
		t.Fatalf("bad, corrected = %+v, want status 400", a)
	}
	// Internal errors are not kept either, and leak nothing.
	a := post(t, url+"broken", "key-a", `{}`, "Idempotency-Key", "k3")
	if a.Status != 500 || strings.Contains(a.Body, "disk on fire") || !strings.Contains(a.Body, "ref ") {
		t.Fatalf("broken = %+v, want status 500 and a body with a %q and no %q", a, "ref ", "disk on fire")
	}
	if again := post(t, url+"broken", "key-a", `{}`, "Idempotency-Key", "k3"); again.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a 500 was replayed: %+v, want no Idempotent-Replayed", again)
	}
	// A key shown once is never stored: its replay withholds it.
	k := post(t, url+"key", "key-a", `{}`, "Idempotency-Key", "k4")
	kr := post(t, url+"key", "key-a", `{}`, "Idempotency-Key", "k4")
	if !strings.Contains(k.Body, "cs_sk_abcdefghij") || strings.Contains(kr.Body, "cs_sk_abcdefghij") || !strings.Contains(kr.Body, "withheld") ||
		!strings.Contains(k.Body, "whsec_QC/Yw") || strings.Contains(kr.Body, "whsec_QC/Yw") {
		t.Fatalf("key answer %q, replay %q; want the key and secret (%q, %q) in the answer only, the replay saying %q", k.Body, kr.Body, "cs_sk_abcdefghij", "whsec_QC/Yw", "withheld")
	}
	raw := dump(t, db)
	if strings.Contains(raw, "abcdefghij") {
		t.Fatalf("a key reached the store, want no %q in it: %s", "abcdefghij", raw)
	}

	// After the TTL (7 days by default) the key is forgotten: the same request runs again.
	clk.Advance(DefaultIdempotencyTTL + time.Second)
	if a := post(t, url+"write", "key-a", `{"a":1,"b":[1,2]}`, "Idempotency-Key", "k1"); a.Status != 200 || !strings.Contains(a.Body, "write #3") {
		t.Fatalf("after expiry = %+v, want status 200 and a body containing %q", a, "write #3")
	}
	// The sweep prunes what is older than the TTL and keeps the rest.
	n, err := idem.Prune(context.Background(), clk.Now())
	if err != nil || n != 2 { // b's k1 and a's k4; k2 and k3 were released, a's k1 is fresh
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	if n, _ := idem.Prune(context.Background(), clk.Now()); n != 0 {
		t.Fatalf("second prune removed %d, want 0", n)
	}
}

func dump(t *testing.T, db *bolt.DB) string {
	t.Helper()
	var sb strings.Builder
	_ = db.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend(bucketIdempotency, nil, nil, func(k, v []byte) error {
			sb.Write(k)
			sb.Write(v)
			return nil
		})
	})
	return sb.String()
}

func TestIdempotencyConflictWhileInFlight(t *testing.T) {
	app := newFakeApp()
	srv, _, _ := idemServer(t, app, newClock())
	url := srv.URL + "/v1/tools/slow"
	done := make(chan answer, 1)
	go func() { done <- post(t, url, "key-a", `{}`, "Idempotency-Key", "k1") }()
	<-app.entered // the first call is running
	a := post(t, url, "key-a", `{}`, "Idempotency-Key", "k1")
	if a.Status != http.StatusConflict || !strings.Contains(a.Body, "still being processed") {
		t.Fatalf("while in flight = %+v, want status %d and a body containing %q", a, http.StatusConflict, "still being processed")
	}
	close(app.release)
	if first := <-done; first.Status != 200 {
		t.Fatalf("first = %+v, want status 200", first)
	}
	if a := post(t, url, "key-a", `{}`, "Idempotency-Key", "k1"); a.Status != 200 || a.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after = %+v, want status 200 and Idempotent-Replayed true", a)
	}
}

func TestIdempotencyRunsAgainAfterACrash(t *testing.T) {
	// A claim left in flight by a process that stopped never answers: a
	// new process runs the retry.
	app := newFakeApp()
	clk := newClock()
	db := openDB(t)
	old := NewIdempotency(IdempotencyOptions{Store: db, Now: clk.Now, IsWrite: isWrite})
	if _, err := old.claim(context.Background(), kv.Join([]byte("prin_a"), []byte("k1")), fingerprint("write", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	idem := NewIdempotency(IdempotencyOptions{Store: db, Now: clk.Now, IsWrite: isWrite})
	srv := httptest.NewServer(NewServer(Options{App: app, Middleware: []func(http.Handler) http.Handler{idem.Middleware}}))
	defer srv.Close()
	if a := post(t, srv.URL+"/v1/tools/write", "key-a", `{}`, "Idempotency-Key", "k1"); a.Status != 200 || !strings.Contains(a.Body, "write #1") {
		t.Fatalf("retry after restart = %+v, want status 200 and a body containing %q", a, "write #1")
	}
}

func TestGuardHosts(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	public := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}
	tests := []struct {
		name           string
		hosts, origins []string
		local          net.Addr
		host, origin   string
		want           int
	}{
		{"localhost on the port", nil, nil, loop, "localhost:8080", "", 204},
		{"127.0.0.1 on the port", nil, nil, loop, "127.0.0.1:8080", "", 204},
		{"[::1] on the port", nil, nil, loop, "[::1]:8080", "", 204},
		{"localhost without port", nil, nil, loop, "localhost", "", 204},
		{"localhost on another port (a port mapping)", nil, nil, loop, "localhost:9999", "", 204},
		{"rebound name", nil, nil, loop, "evil.example:8080", "", 403},
		{"rebound name, fully qualified", nil, nil, loop, "evil.example.", "", 403},
		{"a name that ends like localhost", nil, nil, loop, "evil-localhost:8080", "", 403},
		{"local origin", nil, nil, loop, "localhost:8080", "http://localhost:8080", 204},
		{"loopback origin under another loopback name", nil, nil, loop, "localhost:8080", "http://127.0.0.1:8080", 204},
		{"foreign origin", nil, nil, loop, "localhost:8080", "http://evil.example", 403},
		{"null origin", nil, nil, loop, "localhost:8080", "null", 403},
		{"origin on another port", nil, nil, loop, "localhost:8080", "http://127.0.0.1:3000", 403},
		{"configured name, any port", []string{"countersign.internal"}, nil, loop, "countersign.internal:8443", "", 204},
		{"configured name, trailing dot", []string{"countersign.internal"}, nil, loop, "Countersign.Internal.", "", 204},
		{"configured list adds to localhost", []string{"countersign.internal"}, nil, loop, "localhost:8080", "", 204},
		{"configured host:port", []string{"Proxy.Local:443"}, nil, loop, "proxy.local:443", "", 204},
		{"configured host:port, other port", []string{"proxy.local:443"}, nil, loop, "proxy.local:8443", "", 403},
		{"configured origin", nil, []string{"https://console.example/"}, loop, "localhost:8080", "https://console.example", 204},
		{"own origin with origins configured", nil, []string{"https://console.example"}, loop, "localhost:8080", "http://localhost:8080", 204},
		// Listening on 0.0.0.0: a request on a public address is checked
		// as well (it used to pass whatever its Host).
		{"public address, rebound name", nil, nil, public, "countersign.example.com", "", 403},
		{"public address, IP host", nil, nil, public, "10.0.0.5:8080", "", 204},
		{"public address, configured name", []string{"countersign.example.com"}, nil, public, "countersign.example.com", "https://countersign.example.com", 204},
		{"public address, other name", []string{"countersign.example.com"}, nil, public, "other.example.com", "", 403},
		{"public address, foreign origin", []string{"countersign.example.com"}, nil, public, "countersign.example.com", "https://x.example", 403},
		{"public address, a loopback origin is the client's", nil, nil, public, "10.0.0.5:8080", "http://localhost:8080", 403},
		{"no Host (HTTP/1.0)", nil, nil, public, "", "", 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHostGuard(tt.hosts, tt.origins, nil).Check(ok, true)
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.Host = tt.host
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tt.local))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if tt.want == 403 && strings.Contains(w.Body.String(), "evil") {
				t.Fatalf("refusal echoes the header, want no %q in it: %s", "evil", w.Body)
			}
		})
	}
}

func TestReadyzFailsWhileTheStoreIsNotOpen(t *testing.T) {
	db := openDB(t)
	srv := httptest.NewServer(NewServer(Options{App: newFakeApp(), Ready: func() error {
		return db.View(context.Background(), func(kv.Tx) error { return nil })
	}}))
	defer srv.Close()
	get := func() answer {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(b)}
	}
	if a := get(); a.Status != 200 {
		t.Fatalf("open = %+v, want status 200", a)
	}
	db.Close()
	a := get()
	if a.Status != http.StatusServiceUnavailable || !strings.Contains(a.Body, "the store is not open") || strings.Contains(a.Body, "database") {
		t.Fatalf("closed = %+v, want status %d and a body containing %q, with no %q in it", a, http.StatusServiceUnavailable, "the store is not open", "database")
	}
}

func TestRequestIDAndNoLeaks(t *testing.T) {
	var logs bytes.Buffer
	log := newTestLogger(&logs)
	srv := httptest.NewServer(NewServer(Options{App: newFakeApp(), Logger: log}))
	defer srv.Close()
	a := post(t, srv.URL+"/v1/tools/broken", "key-a", `{}`)
	id := a.Header.Get("X-Request-ID")
	if a.Status != 500 || id == "" || strings.Contains(a.Body, "disk on fire") || !strings.Contains(a.Body, "(ref "+id+")") {
		t.Fatalf("internal error = %+v, want status 500, an X-Request-ID, a body naming %q and no %q in it", a, "(ref "+id+")", "disk on fire")
	}
	if !strings.Contains(logs.String(), "disk on fire") || !strings.Contains(logs.String(), id) {
		t.Fatalf("the detail belongs in the log under the ref, want %q and %q in: %s", "disk on fire", id, logs.String())
	}
	for _, path := range []string{"/healthz", "/nope"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Request-ID") == "" {
			t.Fatalf("%s: no X-Request-ID, want one", path)
		}
	}
	if strings.Contains(logs.String(), "key-a") {
		t.Fatalf("a key reached the log, want no %q in it: %s", "key-a", logs.String())
	}
}

func TestMetricsHandlerToken(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, fakeStats{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveCall(bot.CallEvent{Tool: "confirm_change", Caller: &bot.Caller{Surface: "slack"}, Decided: true})
	// The same click retried: answered, not decided again, not counted.
	m.ObserveCall(bot.CallEvent{Tool: "confirm_change", Caller: &bot.Caller{Surface: "slack"}})
	m.ObserveCall(bot.CallEvent{Tool: "confirm_change", Caller: &bot.Caller{Surface: "http"}, Err: &bot.Error{Kind: bot.KindDenied}})
	m.ObserveRequest("POST /v1/tools/{name}", 429, 0)
	srv := httptest.NewServer(MetricsHandler(reg, bot.Secret("s3cret"), newTestLogger(io.Discard)))
	defer srv.Close()
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL, nil)
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
	if code, _ := get(""); code != 401 {
		t.Fatalf("no token: status %d, want 401", code)
	}
	if code, _ := get("wrong"); code != 401 {
		t.Fatalf("wrong token: status %d, want 401", code)
	}
	code, body := get("s3cret")
	for _, want := range []string{
		`countersign_tool_calls_total{outcome="ok",tool="confirm_change"} 2`,
		`countersign_tool_calls_total{outcome="denied",tool="confirm_change"} 1`,
		`countersign_decisions_total{outcome="approved",surface="slack"} 1`,
		`countersign_rate_limited_total{route="POST /v1/tools/{name}"} 1`,
		`countersign_pending_items{kind="action"} 2`,
		`countersign_outbox_depth{sink="slack"} 3`,
		`countersign_pending_oldest_seconds 90`,
		`countersign_outbox_retrying{sink="slack"} 1`,
		`countersign_outbox_given_up_total{sink="slack"} 2`,
		`countersign_store_readable 1`,
		`go_goroutines`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("scrape = status %d, want 200 and a body containing %s:\n%s", code, want, body)
		}
	}
	if strings.Contains(body, `surface="http"`) {
		t.Fatal("a denied decision was counted")
	}
}

func newTestLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

type fakeStats struct{}

func (fakeStats) PendingByKind(context.Context) (map[bot.ItemKind]int, error) {
	return map[bot.ItemKind]int{bot.KindAction: 2, bot.KindMemoryChange: 0}, nil
}

func (fakeStats) PendingOldest(context.Context) (time.Duration, error) { return 90 * time.Second, nil }

func (fakeStats) OutboxStats(context.Context) (map[string]bot.OutboxStat, error) {
	return map[string]bot.OutboxStat{"slack": {Depth: 3, Retrying: 1, Failures: 4, GivenUp: 2}}, nil
}
