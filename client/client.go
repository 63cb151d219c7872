// Package client is the executor side of Countersign for Go agent runtimes:
// it asks for a confirmation (confirm_action), waits for the decision with
// short polls (never holding a connection past the HTTP client's timeout),
// verifies the signed receipt offline against the deployment's public key,
// checks the receipt binds the exact arguments about to run, and redeems the
// receipt (redeem_receipt) so the action is recorded as executed once.
//
// It imports only the standard library and the receipt format package.
package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign/receipt"
)

// Client talks to one Countersign deployment as one agent key.
type Client struct {
	base string
	key  string
	pub  ed25519.PublicKey
	// HTTP sends the requests; New sets a client with a 30s timeout.
	HTTP *http.Client
	// PollWait is the wait_seconds of each action_status poll; New sets
	// 20s. Keep it below HTTP's timeout.
	PollWait time.Duration
	// Now is the clock receipts are checked against; New sets time.Now.
	Now func() time.Time
}

// New returns a client of the deployment at baseURL (for example
// https://countersign.example.com) using apiKey (an agent's cs_sk_ key),
// trusting receipts signed by publicKey (export_public_key).
func New(baseURL, apiKey string, publicKey ed25519.PublicKey) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), key: apiKey, pub: publicKey,
		HTTP: &http.Client{Timeout: 30 * time.Second}, PollWait: 20 * time.Second, Now: time.Now}
}

// Action is one call the agent wants to make: confirm_action's arguments.
type Action struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Summary   string          `json:"summary,omitempty"`
	DryRun    string          `json:"dry_run,omitempty"`
	ActionID  string          `json:"action_id,omitempty"`
}

// Approval is a verified, approved action: run Tool with exactly
// Arguments, after Redeem.
type Approval struct {
	RequestID   string
	Tool        string
	Arguments   json.RawMessage // the approved arguments (an approver may have edited them)
	Edited      bool            // Arguments differ from what was asked for
	ConfirmedBy string
	Receipt     string
	Payload     receipt.Payload
}

// Refused is the error of an action that was not approved (denied or
// expired): Reason is the approver's or the automatic policy's reason.
type Refused struct {
	RequestID string
	Status    string
	Reason    string
}

func (e *Refused) Error() string {
	return fmt.Sprintf("countersign: %s was %s: %s", e.RequestID, e.Status, e.Reason)
}

// APIError is a non-200 answer of the server.
type APIError struct {
	Status  int
	Message string
	Field   string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("countersign: HTTP %d: %s", e.Status, e.Message)
}

// ErrReceipt is wrapped by every failed receipt check.
var ErrReceipt = errors.New("countersign: receipt check failed")

// ConfirmAction asks for a confirmation of a and waits (until ctx ends) for
// the decision. On approval it verifies the receipt offline and returns the
// approval to run; it does not redeem (call Redeem right before running).
func (c *Client) ConfirmAction(ctx context.Context, a Action) (*Approval, error) {
	if len(a.Arguments) == 0 {
		a.Arguments = json.RawMessage("{}")
	}
	d, err := c.call(ctx, "confirm_action", a)
	if err != nil {
		return nil, err
	}
	id, _ := d["request_id"].(string)
	for d["status"] == "pending" {
		wait := c.PollWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		secs := max(int(wait/time.Second), 1)
		if d, err = c.call(ctx, "action_status", map[string]any{"request_id": id, "wait_seconds": secs}); err != nil {
			return nil, err
		}
	}
	if d["status"] != "approved" {
		reason, _ := d["reason"].(string)
		status, _ := d["status"].(string)
		return nil, &Refused{RequestID: id, Status: status, Reason: reason}
	}
	return c.check(a, d)
}

// check verifies an approved request's receipt and that it binds the
// approved arguments of the tool asked for.
func (c *Client) check(a Action, d map[string]any) (*Approval, error) {
	rec, _ := d["receipt"].(string)
	p, err := receipt.Verify(rec, c.pub, c.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReceipt, err)
	}
	id, _ := d["request_id"].(string)
	if p.RequestID != id || p.Tool != a.Tool {
		return nil, fmt.Errorf("%w: receipt is for %s %s, not %s %s", ErrReceipt, p.RequestID, p.Tool, id, a.Tool)
	}
	approved, err := json.Marshal(d["approved_arguments"])
	if err != nil || d["approved_arguments"] == nil {
		return nil, fmt.Errorf("%w: the answer carries no approved_arguments", ErrReceipt)
	}
	h, err := receipt.ArgsHash(a.Tool, approved)
	if err != nil || h != p.ApprovedArgsSHA256 {
		return nil, fmt.Errorf("%w: the approved arguments do not hash to the receipt's approved_args_sha256", ErrReceipt)
	}
	asked, err := receipt.ArgsHash(a.Tool, a.Arguments)
	if err != nil {
		return nil, fmt.Errorf("countersign: arguments are not JSON: %w", err)
	}
	cb, _ := d["confirmed_by"].(string)
	return &Approval{RequestID: id, Tool: p.Tool, Arguments: approved, Edited: asked != h,
		ConfirmedBy: cb, Receipt: rec, Payload: p}, nil
}

// Redeem records the approved action as executed (redeem_receipt). It
// succeeds once per receipt; a second redemption is an *APIError with
// Status 409 naming when the first happened.
func (c *Client) Redeem(ctx context.Context, rec string) error {
	_, err := c.call(ctx, "redeem_receipt", map[string]any{"receipt": rec})
	return err
}

// call posts args to tool and returns the answer's data.
func (c *Client) call(ctx context.Context, tool string, args any) (map[string]any, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/tools/"+tool, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("countersign: %s: %w", tool, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("countersign: %s: %w", tool, err)
	}
	var out struct {
		Data  map[string]any `json:"data"`
		Error string         `json:"error"`
		Field string         `json:"field"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers as written, so arguments hash as the server hashed them
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("countersign: %s: HTTP %d, answer is not JSON", tool, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &APIError{Status: resp.StatusCode, Message: out.Error, Field: out.Field}
	}
	return out.Data, nil
}
