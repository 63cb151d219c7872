package actiontools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

func TestSignAndVerify(t *testing.T) {
	// The Standard Webhooks reference vector.
	secret, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"test": 2432232314}`)
	if got := Sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body); got != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("Sign = %s, want %s", got, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	}
	now := time.Unix(1614265330, 0)
	h := http.Header{}
	h.Set(HeaderID, "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set(HeaderTimestamp, "1614265330")
	h.Set(HeaderSignature, "v1,bm9wZQ== v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	if err := Verify(secret, h, body, now, 0); err != nil {
		t.Fatalf("Verify (rotation list): %v", err)
	}
	tests := []struct {
		name   string
		mutate func(h http.Header, body []byte) (http.Header, []byte, time.Time)
		want   error
	}{
		{"a flipped body byte", func(h http.Header, b []byte) (http.Header, []byte, time.Time) {
			c := append([]byte(nil), b...)
			c[3] ^= 1
			return h, c, now
		}, ErrSignature},
		{"a truncated signature", func(h http.Header, b []byte) (http.Header, []byte, time.Time) {
			h.Set(HeaderSignature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE")
			return h, b, now
		}, ErrSignature},
		{"another id", func(h http.Header, b []byte) (http.Header, []byte, time.Time) {
			h.Set(HeaderID, "msg_other")
			return h, b, now
		}, ErrSignature},
		{"301s late", func(h http.Header, b []byte) (http.Header, []byte, time.Time) {
			return h, b, now.Add(301 * time.Second)
		}, ErrTimestamp},
		{"301s early", func(h http.Header, b []byte) (http.Header, []byte, time.Time) {
			return h, b, now.Add(-301 * time.Second)
		}, ErrTimestamp},
		{"300s late is fine", func(h http.Header, b []byte) (http.Header, []byte, time.Time) {
			return h, b, now.Add(300 * time.Second)
		}, nil},
		{"no signature", func(h http.Header, b []byte) (http.Header, []byte, time.Time) {
			h.Del(HeaderSignature)
			return h, b, now
		}, ErrMissingHeaders},
		{"a bad timestamp", func(h http.Header, b []byte) (http.Header, []byte, time.Time) {
			h.Set(HeaderTimestamp, "soon")
			return h, b, now
		}, ErrTimestamp},
	}
	for _, tt := range tests {
		h2, b2, at := tt.mutate(h.Clone(), body)
		if err := Verify(secret, h2, b2, at, 0); !errors.Is(err, tt.want) {
			t.Errorf("%s: Verify = %v, want %v", tt.name, err, tt.want)
		}
	}
	for _, bad := range []string{"", "  ", "whsec_", "whsec_***"} {
		if _, err := ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q) accepted, want an error", bad)
		}
	}
	if s, err := ParseSecret("plain-secret-value"); err != nil || string(s) != "plain-secret-value" {
		t.Fatalf("a plain secret = %q, %v, want %q and no error", s, err, "plain-secret-value")
	}
}

func FuzzVerify(f *testing.F) {
	f.Add([]byte("k"), "msg_1", int64(1700000000), []byte(`{"a":1}`), uint16(0))
	f.Fuzz(func(t *testing.T, secret []byte, id string, ts int64, body []byte, flip uint16) {
		if len(secret) == 0 || ts < 0 || ts > 1<<40 || strings.ContainsAny(id, "\r\n\x00") || strings.TrimSpace(id) != id || id == "" {
			return
		}
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(HeaderSignature, Sign(secret, id, ts, body))
		now := time.Unix(ts, 0)
		if err := Verify(secret, h, body, now, 0); err != nil {
			t.Fatalf("verify(sign(m)) = %v", err)
		}
		if len(body) > 0 {
			m := append([]byte(nil), body...)
			m[int(flip)%len(m)] ^= 0x01
			if err := Verify(secret, h, m, now, 0); err == nil {
				t.Fatal("a mutated body verified")
			}
		}
	})
}

// receiver is a loopback callback endpoint that verifies every delivery.
type receiver struct {
	t      *testing.T
	secret []byte
	now    func() time.Time
	mu     sync.Mutex
	status int
	ids    []string // webhook-id of every attempt
	ok     []Payload
	bad    int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.ids = append(rc.ids, r.Header.Get(HeaderID))
	if err := Verify(rc.secret, r.Header, body, rc.now(), 0); err != nil {
		rc.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if rc.status != 200 {
		if rc.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "120")
		}
		w.WriteHeader(rc.status)
		return
	}
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		rc.t.Errorf("payload: %v", err)
	}
	rc.ok = append(rc.ok, p)
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) set(status int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.status = status
}

func (rc *receiver) snapshot() (ids []string, ok []Payload, bad int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.ids...), append([]Payload(nil), rc.ok...), rc.bad
}

func TestCallbackDelivery(t *testing.T) {
	secret := []byte("test-callback-secret-0123456789")
	rc := &receiver{t: t, secret: secret, status: 500}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	// host:port: callbacks.allowed_hosts matches the port too.
	e := newEnv(t, Options{CallbackSecret: secret, CallbackHosts: []string{srv.Listener.Addr().String()}})
	rc.now = e.clock.Now
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")

	d, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"callback_url": srv.URL + "/hook?agent=1"}))
	id := d["request_id"].(string)
	if n := len(e.events(CallbackSink, bot.EventDecided)); n != 0 {
		t.Fatalf("a callback was queued before the decision: %d, want 0", n)
	}
	e.ok(alice, "approve_action", map[string]any{"request_id": id})
	drain := func() {
		t.Helper()
		if err := e.b.Outbox().Drain(context.Background(), CallbackSink, e.s.DeliverCallback); err != nil {
			t.Fatal(err)
		}
	}
	drain()
	if ids, ok, _ := rc.snapshot(); len(ids) != 1 || len(ok) != 0 {
		t.Fatalf("after a 500: %d attempts, %d delivered; want 1 attempt, none delivered", len(ids), len(ok))
	}
	drain() // not due yet: the backoff holds it
	if ids, _, _ := rc.snapshot(); len(ids) != 1 {
		t.Fatalf("retried before its backoff: %d attempts, want 1", len(ids))
	}
	rc.set(http.StatusTooManyRequests)
	e.clock.Set(start.Add(2 * time.Second))
	drain()
	if evs := e.events(CallbackSink, bot.EventDecided); len(evs) != 1 || !evs[0].NextAttempt.Equal(start.Add(122*time.Second)) {
		t.Fatalf("a 429 did not honour Retry-After: %+v, want one event with its next attempt at %v", evs, start.Add(122*time.Second))
	}
	rc.set(200)
	e.clock.Set(start.Add(3 * time.Minute))
	drain()
	drain()
	ids, ok, bad := rc.snapshot()
	if len(ok) != 1 || bad != 0 || len(ids) != 3 {
		t.Fatalf("%d delivered, %d bad signatures, %d attempts; want 1, 0, 3", len(ok), bad, len(ids))
	}
	for _, got := range ids {
		if got != CallbackID(id, bot.EventDecided) {
			t.Fatalf("webhook-id %q changed between attempts, want %q", got, CallbackID(id, bot.EventDecided))
		}
	}
	p := ok[0]
	if p.Type != "action.decided" || p.Data["request_id"] != id || p.Data["status"] != "approved" || p.Data["confirmed_by"] != "alice ["+alice.ID+"]" || p.Data["args_sha256"] != d["args_sha256"] {
		t.Fatalf("payload = %+v, want type action.decided, request_id %s, status approved, confirmed_by %q and args_sha256 %v", p, id, "alice ["+alice.ID+"]", d["args_sha256"])
	}
	if n := len(e.events(CallbackSink, bot.EventDecided)); n != 0 {
		t.Fatalf("%d callbacks still queued after delivery, want 0", n)
	}

	// A 4xx other than 408 and 429 is permanent: dropped, not retried.
	rc.set(http.StatusGone)
	d2, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"callback_url": srv.URL}))
	e.ok(alice, "deny_action", map[string]any{"request_id": d2["request_id"], "reason": "no"})
	drain()
	if n := len(e.events(CallbackSink, bot.EventDecided)); n != 0 {
		t.Fatalf("a 410 was kept for retry: %d queued, want 0", n)
	}
	// A denial and a timeout call back too.
	rc.set(200)
	d3, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"callback_url": srv.URL}))
	e.sweep(40 * time.Minute) // created at +3m with a 30m timeout
	e.clock.Set(start.Add(40 * time.Minute))
	drain()
	_, ok, _ = rc.snapshot()
	if last := ok[len(ok)-1]; last.Data["request_id"] != d3["request_id"] || last.Data["status"] != "expired" || !strings.HasPrefix(last.Data["reason"].(string), "denied by automatic policy") {
		t.Fatalf("timeout callback = %+v, want request_id %v, status expired and a reason starting %q", last, d3["request_id"], "denied by automatic policy")
	}
}

// TestCallbackToAReceiverDownIsNotGivenUp: a receiver answering 500 is
// down, not refusing the callback: it is retried past bot.GiveUpAfter
// attempts, and delivered once the receiver is back.
func TestCallbackToAReceiverDownIsNotGivenUp(t *testing.T) {
	secret := []byte("test-callback-secret-0123456789")
	rc := &receiver{t: t, secret: secret, status: 500}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnv(t, Options{CallbackSecret: secret, CallbackHosts: []string{srv.Listener.Addr().String()}})
	rc.now = e.clock.Now
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	d, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"callback_url": srv.URL}))
	e.ok(alice, "approve_action", map[string]any{"request_id": d["request_id"]})
	for i := range bot.GiveUpAfter + 2 {
		if err := e.b.Outbox().Drain(context.Background(), CallbackSink, e.s.DeliverCallback); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(start.Add(time.Duration(i+1) * time.Hour))
	}
	if ids, ok, _ := rc.snapshot(); len(ids) != bot.GiveUpAfter+2 || len(ok) != 0 {
		t.Fatalf("receiver down: %d attempts, %d delivered; want %d attempts, none delivered", len(ids), len(ok), bot.GiveUpAfter+2)
	}
	if n := len(e.events(CallbackSink, bot.EventDecided)); n != 1 {
		t.Fatalf("%d callbacks queued after %d failures of a receiver that is down, want it kept", n, bot.GiveUpAfter+2)
	}
	rc.set(200)
	if err := e.b.Outbox().Drain(context.Background(), CallbackSink, e.s.DeliverCallback); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := rc.snapshot(); len(ok) != 1 {
		t.Fatalf("after the receiver is back: %d delivered, want 1", len(ok))
	}
}

// TestUndeliveredCallbackSurvivesRestart: a callback that failed before a
// restart is delivered after it, once.
func TestUndeliveredCallbackSurvivesRestart(t *testing.T) {
	secret := []byte("test-callback-secret-0123456789")
	rc := &receiver{t: t, secret: secret, status: 500}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	// host:port: callbacks.allowed_hosts matches the port too.
	e := newEnv(t, Options{CallbackSecret: secret, CallbackHosts: []string{srv.Listener.Addr().String()}})
	rc.now = e.clock.Now
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	d, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"callback_url": srv.URL}))
	e.ok(alice, "approve_action", map[string]any{"request_id": d["request_id"]})
	if err := e.b.Outbox().Drain(context.Background(), CallbackSink, e.s.DeliverCallback); err != nil {
		t.Fatal(err)
	}
	e.restart()
	rc.set(200)
	e.clock.Set(start.Add(time.Minute))
	for range 3 {
		if err := e.b.Outbox().Drain(context.Background(), CallbackSink, e.s.DeliverCallback); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := rc.snapshot(); len(ok) != 1 || ok[0].Data["request_id"] != d["request_id"] {
		t.Fatalf("after restart: %d deliveries %+v, want 1, of request %v", len(ok), ok, d["request_id"])
	}
}
