package webhook

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAnswersCarryContentLength checks that answers, large ones included,
// are sent whole with their Content-Length rather than chunked, and are one
// JSON value and a newline.
func TestAnswersCarryContentLength(t *testing.T) {
	srv := httptest.NewServer(NewServer(Options{App: newFakeApp()}))
	defer srv.Close()
	big := `{"v":"` + strings.Repeat("x", 10_000) + `"}` // echoed back by "write"
	for _, tc := range []struct {
		name, tool, body string
		status           int
	}{
		{"small answer", "read", `{}`, http.StatusOK},
		{"answer larger than the write buffers", "write", big, http.StatusOK},
		{"error", "bad", `{}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/tools/"+tc.tool, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer key-ops")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if len(resp.TransferEncoding) != 0 || resp.ContentLength != int64(len(body)) {
				t.Fatalf("Transfer-Encoding %v, Content-Length %d for a %d-byte body; want the length and no chunking", resp.TransferEncoding, resp.ContentLength, len(body))
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Fatalf("Content-Type = %q, want %q", ct, "application/json; charset=utf-8")
			}
			var v map[string]any
			if !strings.HasSuffix(string(body), "}\n") || json.Unmarshal(body, &v) != nil {
				t.Fatalf("body is not one JSON object and a newline: %.200q", body)
			}
		})
	}
}
