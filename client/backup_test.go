package client

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// TestBackup: a copy arrives with the audit key the server names; a
// refusal is an *APIError carrying the server's text; a copy shorter than
// announced is a *CutOffError; no server is a *TransportError.
func TestBackup(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer cs_admin":
			w.Header().Set(BackupKeyHeader, "ab12")
			w.Write([]byte("the store"))
		case "Bearer cs_short":
			w.Header().Set("Content-Length", strconv.Itoa(100))
			w.Write([]byte("the st"))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":"denied: Access denied","text":"Access denied: only an admin key"}`))
		}
	}))
	defer srv.Close()
	backup := func(key string) (BackupCopy, string, error) {
		api, err := NewAPI(srv.URL, key)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		got, err := api.Backup(t.Context(), &out)
		return got, out.String(), err
	}
	got, body, err := backup("cs_admin")
	if err != nil || body != "the store" || got.PublicKey != "ab12" || got.Bytes != 9 {
		t.Errorf("backup: %+v %q %v, want 9 bytes %q with the key ab12", got, body, err, "the store")
	}
	_, _, err = backup("cs_agent")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Message != "Access denied: only an admin key" {
		t.Errorf("a refused backup: %v, want an *APIError 403 with the server's text", err)
	}
	_, _, err = backup("cs_short")
	var ce *CutOffError
	if !errors.As(err, &ce) || ce.Got != 6 || ce.Announced != 100 {
		t.Errorf("a cut-off backup: %v, want a *CutOffError of 6 of 100 bytes", err)
	}
	srv.Close()
	_, _, err = backup("cs_admin")
	var te *TransportError
	if !errors.As(err, &te) {
		t.Errorf("no server: %v, want a *TransportError", err)
	}
}
