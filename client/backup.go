package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// BackupPath is the route of online backups of a bbolt store, GET with an
// admin key not limited to some user_ids.
const BackupPath = "/v1/admin/backup"

// BackupKeyHeader carries the audit chain's public key (hex) with a
// backup, so that whoever receives the copy can verify it.
const BackupKeyHeader = "Countersign-Audit-Public-Key"

// BackupCopy is what Backup received.
type BackupCopy struct {
	// PublicKey is the audit key the server named (BackupKeyHeader), hex.
	PublicKey string
	// Bytes is how many bytes were written.
	Bytes int64
}

// CutOffError is a backup whose body ended before the length the server
// announced.
type CutOffError struct {
	Got, Announced int64
	Err            error // the read's error, when there was one
}

func (e *CutOffError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("the copy was cut off after %d of %d bytes: %v", e.Got, e.Announced, e.Err)
	}
	return fmt.Sprintf("got %d bytes, the server announced %d", e.Got, e.Announced)
}

// Unwrap returns the read's error.
func (e *CutOffError) Unwrap() error { return e.Err }

// Backup downloads a consistent copy of the server's store (GET
// BackupPath) into w. It is bounded by ctx only, not by the API's HTTP
// timeout: a large store takes longer than any call. The error is a
// *TransportError when no answer came, an *APIError for a refusal (its
// Message the server's text), and a *CutOffError for a copy shorter than
// announced; w may hold part of a copy then.
func (a *API) Backup(ctx context.Context, w io.Writer) (BackupCopy, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+BackupPath, nil)
	if err != nil {
		return BackupCopy{}, &TransportError{Tool: "backup", Err: err}
	}
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	hc := *a.HTTP
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return BackupCopy{}, &TransportError{Tool: "backup", Err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Text string `json:"text"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Text != "" {
			msg = e.Text
		}
		return BackupCopy{}, &APIError{Status: resp.StatusCode, Message: msg}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return BackupCopy{Bytes: n}, &CutOffError{Got: n, Announced: resp.ContentLength, Err: unwrapURLError(err)}
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return BackupCopy{Bytes: n}, &CutOffError{Got: n, Announced: resp.ContentLength}
	}
	return BackupCopy{PublicKey: resp.Header.Get(BackupKeyHeader), Bytes: n}, nil
}
