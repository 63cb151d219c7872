// Package discordtest fakes Discord on 127.0.0.1 for tests that drive the
// real discordgo client: the REST API (gateway lookup, channel messages,
// interaction callbacks, webhook edits, command registration) and the
// gateway WebSocket (hello, identify, READY, dispatches, heartbeat acks).
// It records every call under a mutex and can script failures.
package discordtest

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Call is one REST request the fake received.
type Call struct {
	Method string
	Path   string // below the API prefix: "channels/C1/messages"
	Auth   string // the Authorization header
	Body   []byte
}

// JSON decodes the call's body into a generic map.
func (c Call) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(c.Body, &m)
	return m
}

// Identify is what a gateway client sent in its op 2.
type Identify struct {
	Token   string `json:"token"`
	Intents int    `json:"intents"`
}

// Failure is a scripted answer to the next matching request.
type Failure struct {
	Method string // "POST"
	Prefix string // path prefix below the API prefix: "channels/C1/messages"
	Status int
	Body   string
	// Drop closes the connection without answering (a network failure:
	// the client's error then quotes the request's URL).
	Drop bool
}

// Server is a fake Discord.
type Server struct {
	// URL is the fake's base URL; APIURL is the REST API below it, in the
	// shape of Countersign's discord.api_url.
	URL, APIURL string
	// Token is the bot token every REST call and identify must carry.
	Token string

	t        testing.TB
	srv      *httptest.Server
	mu       sync.Mutex
	calls    []Call
	fails    []Failure
	messages map[string]map[string]any // message id -> stored message
	nextID   int64
	idents   []Identify
	conns    []*gwConn
	seq      int64
	changed  chan struct{}
}

// APIPrefix is the path the fake serves the REST API under.
const APIPrefix = "/api/v10/"

// New starts a fake Discord on a loopback port; it stops when the test
// ends.
func New(t testing.TB, token string) *Server {
	t.Helper()
	s := &Server{t: t, Token: token, messages: map[string]map[string]any{}, nextID: 900000000000000000, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc(APIPrefix, s.serveREST)
	mux.HandleFunc("/gw/", s.serveGateway)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.APIURL = s.srv.URL + APIPrefix
	t.Cleanup(s.Close)
	return s
}

// Close stops the fake and drops its gateway connections.
func (s *Server) Close() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// notify wakes every waiter; called with s.mu held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Fail scripts the next request matching f to get f's status and body.
func (s *Server) Fail(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails = append(s.fails, f)
}

// Calls returns every REST call so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the calls with method whose path starts with prefix.
func (s *Server) CallsTo(method, prefix string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method && strings.HasPrefix(c.Path, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// Message returns a message the fake holds, as last posted or edited.
func (s *Server) Message(id string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messages[id]
}

// MessagesIn returns the messages the fake holds in channel, oldest first.
func (s *Server) MessagesIn(channel string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, m := range s.messages {
		if m["channel_id"] == channel {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { // numeric ids: shorter is older
		if c := cmp.Compare(len(a), len(b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out := make([]map[string]any, len(ids))
	for i, id := range ids {
		out[i] = s.messages[id]
	}
	return out
}

// Identifies returns the identify payloads received on the gateway.
func (s *Server) Identifies() []Identify {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Identify(nil), s.idents...)
}

// Wait polls cond after every change to the fake until it holds, failing
// the test after a generous deadline. It waits for an asynchronous event;
// it never measures speed.
func (s *Server) Wait(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			s.t.Fatalf("discordtest: timed out waiting for %s; calls: %s", what, s.describe())
		}
	}
}

func (s *Server) describe() string {
	var b strings.Builder
	for _, c := range s.Calls() {
		fmt.Fprintf(&b, "\n  %s %s %s", c.Method, c.Path, c.Body)
	}
	return b.String()
}

func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path := strings.TrimPrefix(r.URL.Path, APIPrefix)
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: path, Auth: r.Header.Get("Authorization"), Body: body})
	var fail *Failure
	for i, f := range s.fails {
		if f.Method == r.Method && strings.HasPrefix(path, f.Prefix) {
			fail = &f
			s.fails = append(s.fails[:i], s.fails[i+1:]...)
			break
		}
	}
	s.notify()
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	if fail != nil && fail.Drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic("discordtest: the connection cannot be dropped")
	}
	if fail != nil {
		w.WriteHeader(fail.Status)
		io.WriteString(w, fail.Body)
		return
	}
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 4 && parts[0] == "interactions" && parts[3] == "callback" && r.Method == "POST":
		w.WriteHeader(http.StatusNoContent)
		return
	case len(parts) == 5 && parts[0] == "webhooks" && parts[3] == "messages" && r.Method == "PATCH":
		s.reply(w, http.StatusOK, s.store("", "", body))
		return
	case len(parts) == 3 && parts[0] == "webhooks" && r.Method == "POST":
		s.reply(w, http.StatusOK, s.store("", "", body))
		return
	}
	if r.Header.Get("Authorization") != "Bot "+s.Token {
		s.reply(w, http.StatusUnauthorized, map[string]any{"message": "401: Unauthorized", "code": 0})
		return
	}
	switch {
	case path == "gateway" && r.Method == "GET":
		s.reply(w, http.StatusOK, map[string]any{"url": "ws" + strings.TrimPrefix(s.URL, "http") + "/gw"})
	case len(parts) == 3 && parts[0] == "channels" && parts[2] == "messages" && r.Method == "POST":
		s.reply(w, http.StatusOK, s.store(parts[1], "", body))
	case len(parts) == 4 && parts[0] == "channels" && parts[2] == "messages" && r.Method == "PATCH":
		s.mu.Lock()
		_, ok := s.messages[parts[3]]
		s.mu.Unlock()
		if !ok {
			s.reply(w, http.StatusNotFound, map[string]any{"message": "Unknown Message", "code": 10008})
			return
		}
		s.reply(w, http.StatusOK, s.store(parts[1], parts[3], body))
	case path == "users/@me/channels" && r.Method == "POST":
		// A DM channel with the recipient: "DM" and their user id.
		var in struct {
			RecipientID string `json:"recipient_id"`
		}
		_ = json.Unmarshal(body, &in)
		s.reply(w, http.StatusOK, map[string]any{"id": "DM" + in.RecipientID, "type": 1, "recipients": []any{map[string]any{"id": in.RecipientID}}})
	case parts[0] == "applications" && parts[len(parts)-1] == "commands" && r.Method == "POST":
		var cmd map[string]any
		_ = json.Unmarshal(body, &cmd)
		cmd["id"] = "7000"
		cmd["application_id"] = parts[1]
		s.reply(w, http.StatusCreated, cmd)
	default:
		s.reply(w, http.StatusNotFound, map[string]any{"message": "404: Not Found", "code": 0})
	}
}

// store records a posted (id "") or edited message and returns it as
// Discord would.
func (s *Server) store(channel, id string, body []byte) map[string]any {
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := map[string]any{}
	if id == "" {
		s.nextID++
		id = strconv.FormatInt(s.nextID, 10)
	} else {
		msg = s.messages[id]
	}
	for k, v := range in {
		if k == "ID" || k == "Channel" || k == "nonce" || k == "enforce_nonce" || k == "allowed_mentions" {
			continue
		}
		msg[k] = v
	}
	msg["id"] = id
	if channel != "" {
		msg["channel_id"] = channel
	}
	msg["author"] = map[string]any{"id": "BOT", "username": "countersign", "bot": true}
	s.messages[id] = msg
	s.notify()
	return msg
}

func (s *Server) reply(w http.ResponseWriter, status int, v any) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// gwConn is one gateway connection.
type gwConn struct {
	mu   sync.Mutex
	ws   *websocket.Conn
	done chan struct{}
	once sync.Once
}

func (c *gwConn) write(v any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(v) // text frames only: binary ones would be read as zlib
}

func (c *gwConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.ws.Close()
	})
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws, done: make(chan struct{})}
	defer c.close()
	if err := c.write(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 45000}}); err != nil {
		return
	}
	var first struct {
		Op int             `json:"op"`
		D  json.RawMessage `json:"d"`
	}
	if err := ws.ReadJSON(&first); err != nil {
		return
	}
	var ready map[string]any
	switch first.Op {
	case 2: // identify: check the token, then READY
		var id Identify
		_ = json.Unmarshal(first.D, &id)
		if id.Token != "Bot "+s.Token {
			ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."))
			return
		}
		s.mu.Lock()
		s.idents = append(s.idents, id)
		s.seq++
		ready = map[string]any{"op": 0, "s": s.seq, "t": "READY", "d": map[string]any{
			"v": 10, "session_id": "S", "user": map[string]any{"id": "BOT", "username": "countersign", "bot": true}, "guilds": []any{},
		}}
		s.mu.Unlock()
	case 6: // resume after a dropped connection
		s.mu.Lock()
		s.seq++
		ready = map[string]any{"op": 0, "s": s.seq, "t": "RESUMED", "d": map[string]any{}}
		s.mu.Unlock()
	default:
		ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4002, "Decode error: expected identify or resume."))
		return
	}
	if err := c.write(ready); err != nil {
		return
	}
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.notify()
	s.mu.Unlock()
	for {
		var f struct {
			Op int `json:"op"`
		}
		if err := ws.ReadJSON(&f); err != nil {
			return
		}
		if f.Op == 1 {
			if err := c.write(map[string]any{"op": 11}); err != nil {
				return
			}
		}
	}
}

// Connected reports whether a gateway client has identified and is
// connected.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) > 0
}

// Dispatch sends an INTERACTION_CREATE with payload to the connected
// gateway client, waiting for one to connect first.
func (s *Server) Dispatch(payload any) {
	s.t.Helper()
	s.DispatchEvent("INTERACTION_CREATE", payload)
}

// DispatchEvent sends the gateway event typ (GUILD_MEMBER_REMOVE…) with
// payload to the connected gateway client, waiting for one to connect
// first.
func (s *Server) DispatchEvent(typ string, payload any) {
	s.t.Helper()
	s.Wait("a gateway connection", s.Connected)
	s.mu.Lock()
	s.seq++
	seq := s.seq
	c := s.conns[len(s.conns)-1]
	s.mu.Unlock()
	if err := c.write(map[string]any{"op": 0, "s": seq, "t": typ, "d": payload}); err != nil {
		s.t.Fatalf("discordtest: dispatch: %v", err)
	}
}

// errNotLoopback is returned by the loopback guards.
var errNotLoopback = errors.New("discordtest: refusing to dial a non-loopback address in a test")

// loopbackDial dials only 127.0.0.0/8 and ::1.
func loopbackDial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%w: %s", errNotLoopback, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Transport is an http.RoundTripper that connects only to loopback
// addresses.
func Transport() http.RoundTripper {
	return &http.Transport{DialContext: loopbackDial, Proxy: nil}
}

// Dialer is a gateway dialer that connects only to loopback addresses.
func Dialer() *websocket.Dialer {
	return &websocket.Dialer{NetDialContext: loopbackDial, HandshakeTimeout: 5 * time.Second}
}

// Sign signs body as Discord signs an interaction sent to an endpoint: the
// hex Ed25519 signature of timestamp+body.
func Sign(key ed25519.PrivateKey, timestamp string, body []byte) string {
	return hex.EncodeToString(ed25519.Sign(key, append([]byte(timestamp), body...)))
}

// Post sends a signed interaction body to url with timestamp ts, and
// returns the status and the decoded answer.
func Post(t testing.TB, url string, key ed25519.PrivateKey, ts time.Time, body []byte) (int, map[string]any) {
	t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	req, err := http.NewRequest("POST", url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature-Timestamp", stamp)
	req.Header.Set("X-Signature-Ed25519", Sign(key, stamp, body))
	c := &http.Client{Transport: Transport(), Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("discordtest: post: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// Clicker is who sends an interaction: a server member with roles, or a
// user in a direct message (GuildID "").
type Clicker struct {
	UserID  string
	Roles   []string
	GuildID string
}

func (c Clicker) into(m map[string]any) {
	user := map[string]any{"id": c.UserID, "username": "u" + c.UserID}
	if c.GuildID == "" {
		m["user"] = user
		m["context"] = 1
		return
	}
	roles := c.Roles
	if roles == nil {
		roles = []string{}
	}
	m["guild_id"] = c.GuildID
	m["member"] = map[string]any{"user": user, "roles": roles, "permissions": "0"}
	m["context"] = 0
}

// Click is a component interaction (type 3): a click on button customID
// (or a choice of values in a select menu) on message msgID in channel.
func Click(id string, who Clicker, channel, msgID, customID string, values ...string) map[string]any {
	data := map[string]any{"custom_id": customID, "component_type": 2}
	if len(values) > 0 {
		data["component_type"] = 3
		data["values"] = values
	}
	m := map[string]any{
		"id": id, "application_id": "APP", "type": 3, "token": "tok-" + id, "version": 1,
		"channel_id": channel, "data": data,
		"message": map[string]any{"id": msgID, "channel_id": channel, "content": "", "author": map[string]any{"id": "BOT"}},
	}
	who.into(m)
	return m
}

// Submit is a modal submit (type 5) of the reject-reason modal customID
// with reason, from a click on message msgID.
func Submit(id string, who Clicker, channel, msgID, customID, reason string) map[string]any {
	m := map[string]any{
		"id": id, "application_id": "APP", "type": 5, "token": "tok-" + id, "version": 1,
		"channel_id": channel,
		"data": map[string]any{"custom_id": customID, "components": []any{
			map[string]any{"type": 1, "components": []any{map[string]any{"type": 4, "custom_id": "reason", "value": reason}}},
		}},
		"message": map[string]any{"id": msgID, "channel_id": channel, "content": "", "author": map[string]any{"id": "BOT"}},
	}
	who.into(m)
	return m
}

// SubmitForm is a modal submit (type 5) of a form with several text
// inputs: values by the inputs' custom ids, one action row each.
func SubmitForm(id string, who Clicker, channel, msgID, customID string, values map[string]string) map[string]any {
	var rows []any
	for _, k := range slices.Sorted(maps.Keys(values)) {
		rows = append(rows, map[string]any{"type": 1, "components": []any{map[string]any{"type": 4, "custom_id": k, "value": values[k]}}})
	}
	m := map[string]any{
		"id": id, "application_id": "APP", "type": 5, "token": "tok-" + id, "version": 1,
		"channel_id": channel,
		"data":       map[string]any{"custom_id": customID, "components": rows},
		"message":    map[string]any{"id": msgID, "channel_id": channel, "content": "", "author": map[string]any{"id": "BOT"}},
	}
	who.into(m)
	return m
}

// Command is a /countersign slash command (type 2) with option command.
func Command(id string, who Clicker, channel, text string) map[string]any {
	m := map[string]any{
		"id": id, "application_id": "APP", "type": 2, "token": "tok-" + id, "version": 1,
		"channel_id": channel,
		"data": map[string]any{"id": "7000", "name": "countersign", "type": 1, "options": []any{
			map[string]any{"name": "command", "type": 3, "value": text},
		}},
	}
	who.into(m)
	return m
}

// Ping is Discord's endpoint check (type 1).
func Ping(id string) map[string]any {
	return map[string]any{"id": id, "application_id": "APP", "type": 1, "token": "tok-" + id, "version": 1}
}

// Marshal encodes v or fails the test.
func Marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
