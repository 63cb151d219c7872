package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitReady: it asks again until the server answers 200, and when the
// context ends first it returns the last answer's error.
func TestWaitReady(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	api, err := NewAPI(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := api.WaitReady(t.Context(), time.Millisecond); err != nil || asked.Load() != 3 {
		t.Errorf("WaitReady: %v after %d asks, want nil after 3 (two 503s, then 200)", err, asked.Load())
	}
	down, err := NewAPI("http://127.0.0.1:1", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := down.WaitReady(ctx, time.Millisecond); err == nil {
		t.Error("WaitReady on a cancelled context with no server: nil, want the last error")
	}
}

func TestAnswerMessage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ans  Answer
		want string
	}{
		{Answer{Status: 200, Text: "done", Error: "ignored"}, "done"},
		{Answer{Status: 200, Raw: []byte("{}\n")}, "{}"},
		{Answer{Status: 400, Error: "user_id: required", Text: "Invalid"}, "user_id: required"},
		{Answer{Status: 502, Text: "Bad gateway"}, "Bad gateway"},
		{Answer{Status: 502, Raw: []byte("upstream down\n")}, "upstream down"},
	} {
		if got := tt.ans.Message(); got != tt.want {
			t.Errorf("%+v.Message() = %q, want %q", tt.ans, got, tt.want)
		}
	}
}

// TestAnswerDataField: a string field as it is, anything else as JSON
// with numbers as written and no HTML escaping; a missing field names the
// fields the data holds.
func TestAnswerDataField(t *testing.T) {
	t.Parallel()
	ans := Answer{Status: 200, Data: map[string]any{
		"request_id": "req_42", "item_id": json.Number("7"), "args": map[string]any{"cmd": "a<b"}, "approved": true,
	}}
	for _, tt := range []struct{ name, want string }{
		{"request_id", "req_42"},
		{"item_id", "7"},
		{"args", `{"cmd":"a<b"}`},
		{"approved", "true"},
	} {
		if got, err := ans.DataField(tt.name); err != nil || got != tt.want {
			t.Errorf("DataField(%q) = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	_, err := ans.DataField("status")
	if err == nil || !strings.Contains(err.Error(), `no field "status" (it has: approved, args, item_id, request_id)`) {
		t.Errorf("a missing field: %v, want the fields it has named", err)
	}
}
