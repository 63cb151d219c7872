package client

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/receipt"
)

// fake is a loopback server: confirm_action answers pending (or first, when
// set), then action_status answers pending `pending` times, then last().
type fake struct {
	key     ed25519.PrivateKey
	pending int
	first   map[string]any               // confirm_action's data; default pending req_1
	last    func(f *fake) map[string]any // the decided answer's data
	// sleep makes a pending action_status wait its wait_seconds, as the
	// server does.
	sleep  bool
	mu     sync.Mutex
	waits  []float64
	bodies []map[string]any
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	var args map[string]any
	json.NewDecoder(r.Body).Decode(&args)
	f.bodies = append(f.bodies, args)
	data := map[string]any{"request_id": "req_1", "status": "pending"}
	switch r.URL.Path {
	case "/v1/tools/confirm_action":
		if f.first != nil {
			data = f.first
		}
	case "/v1/tools/action_status":
		f.waits = append(f.waits, args["wait_seconds"].(float64))
		if len(f.waits) > f.pending {
			data = f.last(f)
		}
	}
	sleep := f.sleep && r.URL.Path == "/v1/tools/action_status" && data["status"] == "pending"
	f.mu.Unlock()
	if sleep {
		select {
		case <-time.After(time.Duration(args["wait_seconds"].(float64)) * time.Second):
		case <-r.Context().Done():
			return
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"text": "answer", "data": data})
}

// approved is an approved answer whose approved_arguments are approved and
// whose receipt, signed with f.key, binds signedTool and signedArgs.
func approved(approvedArgs, signedTool, signedArgs string, issued time.Time) func(f *fake) map[string]any {
	return func(f *fake) map[string]any {
		h, _ := receipt.ArgsHash(signedTool, []byte(signedArgs))
		rec, _ := receipt.Sign(receipt.Payload{RequestID: "req_1", Tool: signedTool, ApprovedArgsSHA256: h,
			ConfirmedBy: "bob [prin_b]", IssuedAt: issued.Unix(), ExpiresAt: issued.Add(time.Hour).Unix()},
			func(m []byte) []byte { return ed25519.Sign(f.key, m) })
		return map[string]any{"request_id": "req_1", "status": "approved", "confirmed_by": "bob [prin_b]",
			"receipt": rec, "approved_arguments": json.RawMessage(approvedArgs), "changes": "drain false → true"}
	}
}

func testKeys() (ed25519.PrivateKey, ed25519.PublicKey) {
	key := ed25519.NewKeyFromSeed([]byte("client-test-key-0123456789abcdef"))
	return key, key.Public().(ed25519.PublicKey)
}

func newTestClient(t *testing.T, url string, pub ed25519.PublicKey) *Client {
	t.Helper()
	c, err := New(url, "cs_sk_test", pub)
	if err != nil {
		t.Fatal(err)
	}
	c.PollWait = 3 * time.Second
	return c
}

var restart = Action{Tool: "restart_service", Arguments: json.RawMessage(`{"service": "web"}`)}

func TestConfirmActionPollsShortAndChecksTheReceipt(t *testing.T) {
	t.Parallel()
	key, pub := testKeys()
	now := time.Now()
	cases := []struct {
		name, approved, tool, signed string
		issued                       time.Time
		outcome                      Outcome
		wantErr                      error
	}{
		{"as asked", `{"service":"web"}`, "restart_service", `{"service":"web"}`, now, Approved, nil},
		{"edited by the approver", `{"drain":true,"service":"web"}`, "restart_service", `{"service":"web","drain":true}`, now, ApprovedWithChanges, nil},
		{"arguments not the signed ones", `{"service":"db"}`, "restart_service", `{"service":"web"}`, now, "", ErrReceipt},
		{"a receipt for another tool", `{"service":"web"}`, "delete_database", `{"service":"web"}`, now, "", ErrReceipt},
		{"a receipt issued before the request (replayed)", `{"service":"web"}`, "restart_service", `{"service":"web"}`, now.Add(-10 * time.Minute), "", ErrReceipt},
		{"within the clock skew", `{"service":"web"}`, "restart_service", `{"service":"web"}`, now.Add(-30 * time.Second), Approved, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{key: key, pending: 2, last: approved(c.approved, c.tool, c.signed, c.issued)}
			srv := httptest.NewServer(f)
			defer srv.Close()
			var saw []string
			cl := newTestClient(t, srv.URL, pub)
			cl.OnPending = func(id string) { saw = append(saw, id) }
			a, err := cl.ConfirmAction(context.Background(), restart)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if len(f.waits) != 3 || f.waits[0] != 3 {
				t.Errorf("polls with wait_seconds %v, want three of 3", f.waits)
			}
			if len(saw) != 1 || saw[0] != "req_1" {
				t.Errorf("OnPending saw %v, want [req_1] once", saw)
			}
			if err == nil && (a.Outcome != c.outcome || a.Edited != (c.outcome == ApprovedWithChanges) || string(a.Arguments) != c.approved) {
				t.Errorf("approval %+v, want outcome %s with %s", a, c.outcome, c.approved)
			}
			if err == nil && c.outcome == ApprovedWithChanges && a.Changes != "drain false → true" {
				t.Errorf("changes = %q, want %q", a.Changes, "drain false → true")
			}
		})
	}
	// A client pinned to another key refuses a good receipt.
	f := &fake{key: key, last: approved(`{"service":"web"}`, "restart_service", `{"service":"web"}`, now)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	otherPub := ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef")).Public().(ed25519.PublicKey)
	if _, err := newTestClient(t, srv.URL, otherPub).ConfirmAction(context.Background(), restart); !errors.Is(err, ErrReceipt) {
		t.Fatalf("another key: %v, want ErrReceipt", err)
	}
	// An approval without a receipt is not an approval.
	f.last = func(*fake) map[string]any {
		return map[string]any{"request_id": "req_1", "status": "approved", "approved_arguments": map[string]any{"service": "web"}}
	}
	if _, err := newTestClient(t, srv.URL, pub).ConfirmAction(context.Background(), restart); !errors.Is(err, ErrReceipt) {
		t.Fatalf("no receipt: %v, want ErrReceipt", err)
	}
	// An answer about another request is refused.
	f.last = func(*fake) map[string]any { return map[string]any{"request_id": "req_2", "status": "denied"} }
	if _, err := newTestClient(t, srv.URL, pub).ConfirmAction(context.Background(), restart); !errors.Is(err, ErrReceipt) {
		t.Fatalf("an answer about req_2: %v, want ErrReceipt", err)
	}
}

// Each way a request ends has its own result.
func TestConfirmActionOutcomes(t *testing.T) {
	t.Parallel()
	key, pub := testKeys()
	answer := func(d map[string]any) func(*fake) map[string]any { return func(*fake) map[string]any { return d } }
	t.Run("denied", func(t *testing.T) {
		f := &fake{key: key, last: answer(map[string]any{"request_id": "req_1", "status": "denied", "reason": "not at peak hour", "decided_by": []string{"bob [prin_b]"}})}
		srv := httptest.NewServer(f)
		defer srv.Close()
		_, err := newTestClient(t, srv.URL, pub).ConfirmAction(context.Background(), restart)
		var d *Denied
		if !errors.As(err, &d) || d.RequestID != "req_1" || d.Reason != "not at peak hour" || len(d.DecidedBy) != 1 || d.DecidedBy[0] != "bob [prin_b]" {
			t.Fatalf("err = %v (%+v), want *Denied by bob", err, d)
		}
	})
	t.Run("expired", func(t *testing.T) {
		f := &fake{key: key, last: answer(map[string]any{"request_id": "req_1", "status": "expired", "reason": "denied by automatic policy: mutating action requires explicit human confirmation"})}
		srv := httptest.NewServer(f)
		defer srv.Close()
		_, err := newTestClient(t, srv.URL, pub).ConfirmAction(context.Background(), restart)
		var x *Expired
		if !errors.As(err, &x) || x.RequestID != "req_1" || !strings.Contains(x.Reason, "automatic policy") {
			t.Fatalf("err = %v, want *Expired", err)
		}
	})
	t.Run("requires clarification", func(t *testing.T) {
		f := &fake{key: key, first: map[string]any{"request_id": "", "status": "requires_clarification", "missing": []string{"service"}}}
		srv := httptest.NewServer(f)
		defer srv.Close()
		_, err := newTestClient(t, srv.URL, pub).ConfirmAction(context.Background(), Action{Tool: "restart_service"})
		var q *NeedsClarification
		if !errors.As(err, &q) || q.Tool != "restart_service" || len(q.Missing) != 1 || q.Missing[0] != "service" {
			t.Fatalf("err = %v, want *NeedsClarification for service", err)
		}
		if len(f.waits) != 0 {
			t.Fatalf("polled %v after a clarification, want no polls", f.waits)
		}
	})
	t.Run("refused by the server", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error": "Access denied: your key is scoped to patient_42", "text": "Access denied: your key is scoped to patient_42"}`))
		}))
		defer srv.Close()
		_, err := newTestClient(t, srv.URL, pub).ConfirmAction(context.Background(), restart)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(ae.Message, "scoped") {
			t.Fatalf("err = %v, want a 403 *APIError", err)
		}
	})
	t.Run("not a Countersign server", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) }))
		defer srv.Close()
		_, err := newTestClient(t, srv.URL, pub).ConfirmAction(context.Background(), restart)
		var te *TransportError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "not Countersign's JSON") {
			t.Fatalf("err = %v, want a *TransportError", err)
		}
	})
}

// A wait that ends before the decision returns the request id, and Resume
// picks it up.
func TestConfirmActionTimesOutAndResumes(t *testing.T) {
	t.Parallel()
	key, pub := testKeys()
	f := &fake{key: key, pending: 1 << 30, sleep: true}
	srv := httptest.NewServer(f)
	defer srv.Close()
	cl := newTestClient(t, srv.URL, pub)
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	_, err := cl.ConfirmAction(ctx, restart)
	var p *Pending
	if !errors.As(err, &p) || p.RequestID != "req_1" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want *Pending req_1 (deadline exceeded)", err)
	}
	if len(f.waits) != 1 || f.waits[0] != 1 {
		// 2.5s: one poll of 1s (the rest minus a second of margin), then
		// too little time for another.
		t.Fatalf("polled with wait_seconds %v, want [1]", f.waits)
	}

	// Decided meanwhile: Resume returns the approval, without asking again.
	f.mu.Lock()
	f.pending, f.waits = 0, nil
	f.last = approved(`{"service":"web"}`, "restart_service", `{"service":"web"}`, time.Now().Add(-time.Hour/2))
	asks := len(f.bodies)
	f.mu.Unlock()
	a, err := cl.Resume(context.Background(), p.RequestID, restart)
	if err != nil || a.RequestID != "req_1" || a.Outcome != Approved {
		t.Fatalf("Resume = %+v, %v, want RequestID req_1, outcome %s and no error", a, err, Approved)
	}
	if len(f.bodies) != asks+1 || f.bodies[asks]["request_id"] != "req_1" {
		t.Fatalf("Resume made %d calls (%v), want one action_status", len(f.bodies)-asks, f.bodies[asks:])
	}

	// A server that goes away mid-wait ends the wait with the id too.
	srv.Close()
	if _, err := cl.Resume(context.Background(), "req_1", restart); !errors.As(err, &p) || p.RequestID != "req_1" {
		t.Fatalf("server gone: %v, want *Pending", err)
	}
}

func TestNewChecksItsArguments(t *testing.T) {
	t.Parallel()
	_, pub := testKeys()
	for _, c := range []struct {
		name, url, key string
		pub            ed25519.PublicKey
		want           string
	}{
		{"short key", "http://127.0.0.1:1", "cs_sk_x", pub[:31], "31 bytes"},
		{"no key", "http://127.0.0.1:1", "cs_sk_x", nil, "0 bytes"},
		{"zero key", "http://127.0.0.1:1", "cs_sk_x", make([]byte, 32), "all zeros"},
		{"no API key", "http://127.0.0.1:1", "", pub, "no API key"},
		{"not a URL", "127.0.0.1:8080", "cs_sk_x", pub, "not an http or https URL"},
		{"credentials in the URL", "http://u:p@127.0.0.1", "cs_sk_x", pub, "credentials"},
	} {
		if _, err := New(c.url, c.key, c.pub); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := ParsePublicKey("zz"); err == nil || !strings.Contains(err.Error(), "not hex") {
		t.Errorf("ParsePublicKey(zz) = %v, want an error saying %q", err, "not hex")
	}
	if k, err := ParsePublicKey(" " + strings.Repeat("ab", 32) + "\n"); err != nil || len(k) != 32 {
		t.Errorf("ParsePublicKey(64 hex digits) = %d bytes, %v, want 32 bytes and no error", len(k), err)
	}
}

func TestConfirmActionSendsEveryArgument(t *testing.T) {
	t.Parallel()
	key, pub := testKeys()
	f := &fake{key: key, first: map[string]any{"request_id": "", "status": "requires_clarification"}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	a := Action{Tool: "delete_database", Arguments: json.RawMessage(`{"db_name":"prod"}`), Summary: "drop prod",
		UserID: "patient_42", AgentID: "ward", RunID: "r7", Category: "destructive",
		RequestedEffects: []string{"drop database prod"}, DryRun: map[string]any{"tables": 42},
		ActionID: "a1", CallbackURL: "http://127.0.0.1:9/cb", Headless: true}
	newTestClient(t, srv.URL, pub).ConfirmAction(context.Background(), a)
	got, _ := json.Marshal(f.bodies[0])
	want := `{"action_id":"a1","agent_id":"ward","arguments":{"db_name":"prod"},"callback_url":"http://127.0.0.1:9/cb","category":"destructive","dry_run":{"tables":42},"headless":true,"requested_effects":["drop database prod"],"run_id":"r7","summary":"drop prod","tool":"delete_database","user_id":"patient_42"}`
	if string(got) != want {
		t.Fatalf("confirm_action body\n got %s\nwant %s", got, want)
	}
	if _, err := newTestClient(t, srv.URL, pub).ConfirmAction(context.Background(), Action{Tool: "x", Arguments: json.RawMessage(`[1]`)}); err == nil || !strings.Contains(err.Error(), "JSON object") {
		t.Fatalf("array arguments: err = %v, want an error saying %q", err, "JSON object")
	}
}
