package client

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/receipt"
)

// fake is a loopback server answering confirm_action pending, then
// action_status pending `pending` times, then approved with the given
// approved arguments and a receipt over signedArgs.
type fake struct {
	key        ed25519.PrivateKey
	pending    int
	approved   string
	signedArgs string
	mu         sync.Mutex
	waits      []float64
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var args map[string]any
	json.NewDecoder(r.Body).Decode(&args)
	data := map[string]any{"request_id": "req_1", "status": "pending"}
	if r.URL.Path == "/v1/tools/action_status" {
		f.waits = append(f.waits, args["wait_seconds"].(float64))
		if len(f.waits) > f.pending {
			h, _ := receipt.ArgsHash("restart_service", []byte(f.signedArgs))
			rec, _ := receipt.Sign(receipt.Payload{RequestID: "req_1", Tool: "restart_service", ApprovedArgsSHA256: h,
				ConfirmedBy: "bob [prin_b]", IssuedAt: time.Now().Unix(), ExpiresAt: time.Now().Add(time.Hour).Unix()},
				func(m []byte) []byte { return ed25519.Sign(f.key, m) })
			data = map[string]any{"request_id": "req_1", "status": "approved", "confirmed_by": "bob [prin_b]",
				"receipt": rec, "approved_arguments": json.RawMessage(f.approved)}
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"data": data})
}

func TestConfirmActionPollsShortAndChecksTheReceipt(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	pub := key.Public().(ed25519.PublicKey)
	cases := []struct {
		name, approved, signed string
		edited                 bool
		wantErr                error
	}{
		{"as asked", `{"service":"web"}`, `{"service":"web"}`, false, nil},
		{"edited by the approver", `{"drain":true,"service":"web"}`, `{"service":"web","drain":true}`, true, nil},
		{"arguments not the signed ones", `{"service":"db"}`, `{"service":"web"}`, false, ErrReceipt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{key: key, pending: 2, approved: c.approved, signedArgs: c.signed}
			srv := httptest.NewServer(f)
			defer srv.Close()
			cl := New(srv.URL, "cs_sk_test", pub)
			cl.PollWait = 3 * time.Second
			a, err := cl.ConfirmAction(context.Background(), Action{Tool: "restart_service", Arguments: json.RawMessage(`{"service": "web"}`)})
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if len(f.waits) != 3 || f.waits[0] != 3 {
				t.Errorf("polls with wait_seconds %v, want three of 3", f.waits)
			}
			if err == nil && (a.Edited != c.edited || string(a.Arguments) != c.approved) {
				t.Errorf("approval %+v", a)
			}
		})
	}
	// A client pinned to another key refuses a good receipt.
	f := &fake{key: key, approved: `{"service":"web"}`, signedArgs: `{"service":"web"}`}
	srv := httptest.NewServer(f)
	defer srv.Close()
	otherPub := ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef")).Public().(ed25519.PublicKey)
	if _, err := New(srv.URL, "k", otherPub).ConfirmAction(context.Background(), Action{Tool: "restart_service", Arguments: json.RawMessage(`{"service":"web"}`)}); !errors.Is(err, ErrReceipt) {
		t.Fatalf("another key: %v", err)
	}
}
