package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// downApp is an application whose store cannot be reached.
type downApp struct{ *fakeApp }

func (downApp) Call(context.Context, *bot.Caller, string, []byte) (bot.Result, error) {
	return bot.Result{}, fmt.Errorf("approvals: load item: %w: dial tcp 10.0.0.5:5432: connection refused", kv.ErrUnavailable)
}

// TestUnavailableStoreIs503WithRetryAfter: a call that fails because the
// store cannot be reached is a 503 with Retry-After and a message that says
// nothing was done, never a 500, and the cause stays in the log.
func TestUnavailableStoreIs503WithRetryAfter(t *testing.T) {
	srv := httptest.NewServer(NewServer(Options{App: downApp{newFakeApp()}}))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/tools/read", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer key-ops")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	msg, _ := body["error"].(string)
	if !strings.Contains(msg, "store is unavailable") || strings.Contains(msg, "10.0.0.5") {
		t.Fatalf("error %q: want the store named, the address kept out", msg)
	}
}
