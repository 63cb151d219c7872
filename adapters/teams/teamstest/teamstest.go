// Package teamstest fakes the Microsoft side of a Teams bot on 127.0.0.1
// for tests that drive the real adapter: the Bot Connector REST API
// (conversations, activities, members), the client-credentials token
// endpoint, and a token issuer that publishes OpenID metadata and a JWKS
// and signs the requests the tests send to the bot, as the Bot Framework
// signs its own. It speaks the wire protocol, records every call under a
// mutex and can script failures.
package teamstest

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Call is one Bot Connector request the fake received.
type Call struct {
	Method string
	Path   string // unescaped, under the API root: v3/conversations/…
	Body   []byte
	Auth   string // the Authorization header
}

// JSON decodes the call's body into a generic map.
func (c Call) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(c.Body, &m)
	return m
}

// Message is an activity the fake holds, as last posted or replaced.
type Message struct {
	ID           string
	Conversation string
	ReplyTo      string // the thread's root, for a reply
	Activity     map[string]any
	Updates      int
}

// Card returns the message's first Adaptive Card, or nil.
func (m Message) Card() map[string]any {
	atts, _ := m.Activity["attachments"].([]any)
	for _, a := range atts {
		am, _ := a.(map[string]any)
		if am["contentType"] == "application/vnd.microsoft.card.adaptive" {
			c, _ := am["content"].(map[string]any)
			return c
		}
	}
	return nil
}

// Failure is a scripted answer to the next matching request.
type Failure struct {
	Method     string // "" any
	PathPrefix string // under the API root: "v3/conversations/19:x/activities"
	Status     int
	Header     map[string]string
	Body       string
	Times      int // how many requests it answers (0: one)
}

// Server is a fake Microsoft: Bot Connector, token endpoint and issuer.
type Server struct {
	// URL is the fake's base URL; APIURL the Bot Connector service URL
	// (ending with '/'), TokenURL the token endpoint, MetadataURL the
	// issuer's OpenID metadata, Issuer its issuer.
	URL, APIURL, TokenURL, MetadataURL, Issuer string
	// AppID and AppPassword are the bot's credentials the fake accepts.
	AppID, AppPassword string

	t   testing.TB
	srv *httptest.Server
	key *rsa.PrivateKey
	kid string

	mu       sync.Mutex
	changed  chan struct{}
	calls    []Call
	tokens   map[string]bool
	issued   int
	keyReads int
	forger   *rsa.PrivateKey // ForgedKID's key, made once
	messages map[string]*Message
	order    []string
	members  map[string]map[string]string // conversation → object id → Teams user id
	failures []Failure
	nextID   int
}

// New starts the fake on a loopback port for the bot appID with client
// secret password; it stops when the test ends.
func New(t testing.TB, appID, password string) *Server {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		AppID: appID, AppPassword: password, t: t, key: key, kid: "fake-key-1",
		changed: make(chan struct{}), tokens: map[string]bool{}, messages: map[string]*Message{},
		members: map[string]map[string]string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openid/metadata", s.metadata)
	mux.HandleFunc("GET /openid/keys", s.keys)
	mux.HandleFunc("POST /oauth2/token", s.token)
	mux.HandleFunc("/connector/", s.connector)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL
	s.APIURL = s.URL + "/connector/"
	s.TokenURL = s.URL + "/oauth2/token"
	s.MetadataURL = s.URL + "/openid/metadata"
	s.Issuer = "https://api.botframework.test"
	return s
}

// AddMember makes the person with Entra object id objectID, whose Teams
// user id is userID, a member of conversation (as the member lookup
// answers).
func (s *Server) AddMember(conversation, objectID, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.members[conversation] == nil {
		s.members[conversation] = map[string]string{}
	}
	s.members[conversation][strings.ToLower(objectID)] = userID
}

// Fail scripts the next request(s) matching f.
func (s *Server) Fail(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times <= 0 {
		f.Times = 1
	}
	s.failures = append(s.failures, f)
}

// Calls returns every Bot Connector call so far, oldest first.
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

// TokensIssued counts the access tokens the token endpoint gave out.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued
}

// Messages returns the messages in conversation (thread roots and
// replies), oldest first.
func (s *Server) Messages(conversation string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, id := range s.order {
		if m := s.messages[id]; m.Conversation == conversation {
			out = append(out, *m)
		}
	}
	return out
}

// Message returns the message with id, as last posted or replaced.
func (s *Server) Message(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	if !ok {
		return Message{}, false
	}
	return *m, true
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
			s.t.Fatalf("timed out waiting for %s; calls: %s", what, s.describe())
		}
	}
}

func (s *Server) describe() string {
	var b strings.Builder
	for _, c := range s.Calls() {
		fmt.Fprintf(&b, "\n  %s %s %s", c.Method, c.Path, clip(string(c.Body), 300))
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// notify wakes the waiters; called with s.mu held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// ---- the issuer ----

// Claims are the claims of a token the Bot Framework would sign for a
// request to the bot: its issuer, the bot's app id as the audience, an
// hour's validity from now, and the service URL.
func (s *Server) Claims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss": s.Issuer, "aud": s.AppID, "serviceurl": s.APIURL,
		"nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(), "iat": now.Add(-time.Minute).Unix(),
	}
}

// KeyFetches is how many times the issuer's JWKS was read.
func (s *Server) KeyFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keyReads
}

// ForgedKID signs claims with a key the issuer does not publish, under
// the key id kid.
func (s *Server) ForgedKID(claims jwt.MapClaims, kid string) string {
	s.mu.Lock()
	if s.forger == nil {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			s.mu.Unlock()
			s.t.Fatal(err)
		}
		s.forger = k
	}
	other := s.forger
	s.mu.Unlock()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	raw, err := tok.SignedString(other)
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

// Sign signs claims with the issuer's key (RS256, its key id).
func (s *Server) Sign(claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = s.kid
	raw, err := tok.SignedString(s.key)
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

// Forged signs claims with a key the issuer does not publish, under the
// issuer's key id.
func (s *Server) Forged(claims jwt.MapClaims) string {
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		s.t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = s.kid
	raw, err := tok.SignedString(other)
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

// Send POSTs activity to the bot's messaging endpoint url with token as
// its bearer token ("" for none) and returns the status and body.
func (s *Server) Send(url string, activity any, token string) (int, []byte) {
	s.t.Helper()
	body, err := json.Marshal(activity)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer": s.Issuer, "authorization_endpoint": s.URL + "/oauth2/authorize", "jwks_uri": s.URL + "/openid/keys",
		"id_token_signing_alg_values_supported": []string{"RS256"}, "token_endpoint_auth_methods_supported": []string{"private_key_jwt"},
	})
}

func (s *Server) keys(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.keyReads++
	s.mu.Unlock()
	b64 := base64.RawURLEncoding.EncodeToString
	writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]any{{
		"kty": "RSA", "use": "sig", "kid": s.kid, "alg": "RS256",
		"n": b64(s.key.N.Bytes()), "e": b64(big.NewInt(int64(s.key.E)).Bytes()),
		"endorsements": []string{"msteams"},
	}}})
}

// ---- the token endpoint ----

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.failure(http.MethodPost, "oauth2/token"); ok {
		s.fail(w, f)
		return
	}
	id, secret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok {
		id, secret = u, p
	}
	if r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "https://api.botframework.com/.default" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "expected a client_credentials grant for https://api.botframework.com/.default"})
		return
	}
	if id != s.AppID || secret != s.AppPassword {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	s.issued++
	tok := "fake-access-token-" + strconv.Itoa(s.issued)
	s.tokens[tok] = true
	writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600, "access_token": tok})
}

// ---- the Bot Connector ----

func (s *Server) connector(w http.ResponseWriter, r *http.Request) {
	raw := strings.TrimPrefix(r.URL.EscapedPath(), "/connector/")
	var segs []string
	for _, p := range strings.Split(raw, "/") {
		u, err := url.PathUnescape(p)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, apiErr("BadArgument", "bad path"))
			return
		}
		segs = append(segs, u)
	}
	body, _ := io.ReadAll(r.Body)
	path := strings.Join(segs, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: path, Body: body, Auth: r.Header.Get("Authorization")})
	defer s.notify()
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || !s.tokens[tok] {
		writeJSON(w, http.StatusUnauthorized, apiErr("Unauthorized", "Authorization has been denied for this request."))
		return
	}
	if f, ok := s.failure(r.Method, path); ok {
		s.fail(w, f)
		return
	}
	if len(segs) < 2 || segs[0] != "v3" || segs[1] != "conversations" {
		writeJSON(w, http.StatusNotFound, apiErr("NotFound", "no such route"))
		return
	}
	var act map[string]any
	if len(body) > 0 && json.Unmarshal(body, &act) != nil {
		writeJSON(w, http.StatusBadRequest, apiErr("BadSyntax", "the body is not JSON"))
		return
	}
	switch {
	case r.Method == http.MethodPost && len(segs) == 2:
		members, _ := act["members"].([]any)
		if len(members) != 1 {
			writeJSON(w, http.StatusBadRequest, apiErr("BadArgument", "one member expected"))
			return
		}
		user, _ := members[0].(map[string]any)["id"].(string)
		writeJSON(w, http.StatusCreated, map[string]string{"id": "a:personal-" + user})
	case r.Method == http.MethodPost && len(segs) == 4 && segs[3] == "activities":
		writeJSON(w, http.StatusCreated, map[string]string{"id": s.store(segs[2], "", act)})
	case r.Method == http.MethodPost && len(segs) == 5 && segs[3] == "activities":
		if _, ok := s.messages[segs[4]]; !ok && !strings.HasPrefix(segs[2], "a:") {
			writeJSON(w, http.StatusNotFound, apiErr("ActivityNotFoundInConversation", "no such activity"))
			return
		}
		writeJSON(w, http.StatusCreated, map[string]string{"id": s.store(segs[2], segs[4], act)})
	case r.Method == http.MethodPut && len(segs) == 5 && segs[3] == "activities":
		m, ok := s.messages[segs[4]]
		if !ok || m.Conversation != segs[2] {
			writeJSON(w, http.StatusNotFound, apiErr("ActivityNotFoundInConversation", "no such activity"))
			return
		}
		m.Activity, m.Updates = act, m.Updates+1
		writeJSON(w, http.StatusOK, map[string]string{"id": m.ID})
	case r.Method == http.MethodGet && len(segs) == 5 && segs[3] == "members":
		mri, ok := s.members[segs[2]][strings.ToLower(segs[4])]
		if !ok {
			writeJSON(w, http.StatusNotFound, apiErr("MemberNotFoundInConversation", "The member is not in the conversation."))
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": mri, "aadObjectId": segs[4], "name": "member"})
	default:
		writeJSON(w, http.StatusNotFound, apiErr("NotFound", "no such route"))
	}
}

// store keeps a new activity and returns its id; called with s.mu held.
func (s *Server) store(conversation, replyTo string, act map[string]any) string {
	s.nextID++
	id := fmt.Sprintf("1700000000%03d", s.nextID)
	s.messages[id] = &Message{ID: id, Conversation: conversation, ReplyTo: replyTo, Activity: act}
	s.order = append(s.order, id)
	return id
}

// failure takes the first scripted failure matching; called with s.mu held.
func (s *Server) failure(method, path string) (Failure, bool) {
	for i, f := range s.failures {
		if (f.Method == "" || f.Method == method) && strings.HasPrefix(path, f.PathPrefix) {
			s.failures[i].Times--
			if s.failures[i].Times <= 0 {
				s.failures = append(s.failures[:i], s.failures[i+1:]...)
			}
			return f, true
		}
	}
	return Failure{}, false
}

func (s *Server) fail(w http.ResponseWriter, f Failure) {
	for k, v := range f.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_, _ = io.WriteString(w, f.Body)
}

func apiErr(code, msg string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": msg}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
