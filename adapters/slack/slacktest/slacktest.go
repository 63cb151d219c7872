// Package slacktest fakes Slack's Web API and Socket Mode on 127.0.0.1 for
// tests that drive the Slack adapter's real slack-go client: slack-go's
// own test server with handlers for the methods it lacks or cannot be
// asserted on. It records every call under a mutex and can script
// failures; Client and Dialer refuse to reach anything but loopback.
package slacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	slackgo "github.com/slack-go/slack/slacktest"
)

// Call is one Web API call the fake received.
type Call struct {
	Method string
	Form   url.Values     // form-encoded methods (chat.*)
	JSON   map[string]any // JSON methods (views.open)
	Auth   string         // the Authorization header
	TS     string         // the ts the fake answered a chat.postMessage with
}

// Blocks decodes the call's blocks (chat.* form field, or the view's).
func (c Call) Blocks(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	raw := c.Form.Get("blocks")
	if raw == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("%s: blocks are not JSON: %v\n%s", c.Method, err, raw)
	}
	return out
}

// Server is a fake Slack.
type Server struct {
	srv *slackgo.Server

	mu       sync.Mutex
	calls    []Call
	ts       int
	failures map[string][]func(http.ResponseWriter) // consumed in order, per method
	acks     []map[string]any                       // Socket Mode frames the bot sent
	opens    int                                    // apps.connections.open calls
	conns    []*websocket.Conn

	frames    chan string // Socket Mode frames to send to the bot
	socketURL string      // what apps.connections.open answers ("": the fake's socket)
}

// New starts a fake Slack on a loopback port; it stops when the test
// ends.
func New(t testing.TB) *Server {
	t.Helper()
	f := &Server{failures: map[string][]func(http.ResponseWriter){}, frames: make(chan string, 64)}
	f.srv = slackgo.NewTestServer(func(c slackgo.Customize) {
		for _, m := range []string{"chat.postMessage", "chat.update", "chat.postEphemeral", "views.open", "apps.connections.open"} {
			c.Handle("/"+m, f.handler(m))
		}
		c.Handle("/ws", f.socket)
	})
	f.srv.Start()
	t.Cleanup(func() {
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.srv.Stop()
	})
	return f
}

// URL is the Web API base the adapter is pointed at.
func (f *Server) URL() string { return f.srv.GetAPIURL() }

// Fail makes the next call of method answer with respond.
func (f *Server) Fail(method string, respond func(http.ResponseWriter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], respond)
}

// RateLimit makes the next call of method answer 429 with Retry-After.
func (f *Server) RateLimit(method string, seconds int) {
	f.Fail(method, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", fmt.Sprint(seconds))
		w.WriteHeader(http.StatusTooManyRequests)
	})
}

// SlackError makes the next call of method answer ok:false with code.
func (f *Server) SlackError(method, code string) {
	f.Fail(method, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ok":false,"error":%q}`, code)
	})
}

// Calls returns the recorded calls of method (all calls if method is "").
func (f *Server) Calls(method string) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Acks returns the Socket Mode frames the bot sent.
func (f *Server) Acks() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.acks...)
}

// Opens counts apps.connections.open calls.
func (f *Server) Opens() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opens
}

func (f *Server) handler(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := Call{Method: method, Auth: r.Header.Get("Authorization")}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			body, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(body, &c.JSON)
		} else {
			_ = r.ParseForm()
			c.Form = r.PostForm
		}
		f.mu.Lock()
		var fail func(http.ResponseWriter)
		if q := f.failures[method]; len(q) > 0 {
			fail, f.failures[method] = q[0], q[1:]
		}
		f.ts++
		ts := fmt.Sprintf("1767225600.%06d", f.ts)
		if method == "chat.postMessage" && fail == nil {
			c.TS = ts
		}
		f.calls = append(f.calls, c)
		if method == "apps.connections.open" {
			f.opens++
		}
		f.mu.Unlock()
		if fail != nil {
			fail(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		var resp any
		switch method {
		case "chat.postMessage":
			resp = map[string]any{"ok": true, "channel": c.Form.Get("channel"), "ts": ts, "message": map[string]any{"text": c.Form.Get("text")}}
		case "chat.update":
			resp = map[string]any{"ok": true, "channel": c.Form.Get("channel"), "ts": c.Form.Get("ts"), "text": c.Form.Get("text")}
		case "chat.postEphemeral":
			resp = map[string]any{"ok": true, "message_ts": ts}
		case "views.open":
			resp = map[string]any{"ok": true, "view": map[string]any{"id": "V" + ts}}
		case "apps.connections.open":
			f.mu.Lock()
			u := f.socketURL
			f.mu.Unlock()
			if u == "" {
				u = "ws://" + f.srv.ServerAddr + "/ws"
			}
			resp = map[string]any{"ok": true, "url": u}
		}
		_ = json.NewEncoder(w).Encode(resp)
	}
}

// socket speaks Socket Mode: hello, then the queued frames; it pings every
// 100 ms (the client treats missing pings as a dead connection) and records
// every frame the bot sends.
func (f *Server) socket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.conns = append(f.conns, conn)
	f.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var m map[string]any
			if err := conn.ReadJSON(&m); err != nil {
				return
			}
			f.mu.Lock()
			f.acks = append(f.acks, m)
			f.mu.Unlock()
		}
	}()
	var wmu sync.Mutex
	write := func(s string) error {
		wmu.Lock()
		defer wmu.Unlock()
		return conn.WriteMessage(websocket.TextMessage, []byte(s))
	}
	if write(`{"type":"hello","num_connections":1}`) != nil {
		return
	}
	ping := time.NewTicker(100 * time.Millisecond)
	defer ping.Stop()
	for {
		select {
		case <-done:
			return
		case <-ping.C:
			if conn.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second)) != nil {
				return
			}
		case fr := <-f.frames:
			if write(fr) != nil {
				f.frames <- fr // the next connection sends it
				return
			}
		}
	}
}

// Send queues a Socket Mode envelope for the bot.
func (f *Server) Send(envelopeType, envelopeID string, payload any) {
	b, _ := json.Marshal(map[string]any{"type": envelopeType, "envelope_id": envelopeID, "payload": payload, "accepts_response_payload": true})
	f.frames <- string(b)
}

// SocketURL makes apps.connections.open answer u from now on instead of
// the fake's own socket ("" restores it): a URL with a ticket, one that
// cannot be dialled.
func (f *Server) SocketURL(u string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.socketURL = u
}

// Disconnect asks the connected Socket Mode client to reconnect, as Slack
// does before it rotates a connection.
func (f *Server) Disconnect() {
	f.frames <- `{"type":"disconnect","reason":"refresh_requested"}`
}

// isLoopback reports whether host is a loopback address or localhost.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOnly fails any request to a host that is not on this machine, so
// no test can reach the real Slack.
type loopbackOnly struct{ next http.RoundTripper }

func (l loopbackOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if !isLoopback(r.URL.Hostname()) {
		return nil, fmt.Errorf("test guard: refusing a request to non-loopback host %q", r.URL.Host)
	}
	return l.next.RoundTrip(r)
}

// Client is an HTTP client that connects only to loopback addresses.
func Client() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: loopbackOnly{http.DefaultTransport}}
}

// Dialer is a Socket Mode dialer that connects only to loopback addresses.
func Dialer() *websocket.Dialer {
	return &websocket.Dialer{
		HandshakeTimeout: 5 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil || !isLoopback(host) {
				return nil, fmt.Errorf("test guard: refusing to dial non-loopback %q", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}
