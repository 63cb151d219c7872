// Package client is the executor side of Countersign for Go agent runtimes:
// it asks for a confirmation (confirm_action), waits for the decision with
// short polls (never holding a connection past the HTTP client's timeout,
// never past the context's deadline), verifies the signed receipt offline
// against the deployment's pinned public key, checks the receipt binds this
// request, the tool and the exact arguments about to run, and redeems the
// receipt (redeem_receipt) so the action is recorded as executed once.
//
// Each way a request can end has its own result: an *Approval (Outcome
// Approved or ApprovedWithChanges), or an error that is a *Denied,
// *Expired, *NeedsClarification or *Pending (the wait ended first: Resume
// continues it), an *APIError (the server refused the call), a
// *TransportError (no answer), or wraps ErrReceipt (never run then).
//
// API is the plain HTTP client of the tool API that Client uses; the
// countersign command and the Claude Code hook use it too.
//
// It imports only the standard library and the receipt format package.
package client

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/receipt"
)

// Client asks one Countersign deployment for confirmations as one agent
// key, and trusts only receipts signed by that deployment's key.
type Client struct {
	// API makes the HTTP calls; New sets it.
	API *API
	// PollWait is the wait_seconds of each action_status poll; New sets
	// 20s. Keep it below the HTTP client's timeout.
	PollWait time.Duration
	// Now is the clock receipts are checked against; New sets time.Now.
	Now func() time.Time
	// ClockSkew is how much earlier than the request a fresh receipt may
	// say it was issued (the server's clock may run behind this one); New
	// sets a minute. See ConfirmAction.
	ClockSkew time.Duration
	// OnPending, when set, is called once per wait with the request id,
	// when the request turns out to be pending and the client starts to
	// wait for a person (to log it, or show it to the user).
	OnPending func(requestID string)

	pub ed25519.PublicKey
}

// New returns a client of the deployment at baseURL (for example
// https://countersign.example.com) using apiKey (an agent's cs_sk_ key),
// trusting receipts signed by publicKey (`countersign audit pubkey`, or the
// export_public_key tool). It refuses a URL that is not http(s), an empty
// key and a public key that is not an Ed25519 key, before anything is asked
// of a person.
func New(baseURL, apiKey string, publicKey ed25519.PublicKey) (*Client, error) {
	if strings.TrimSpace(apiKey) == "" {
		return nil, errors.New("countersign: no API key: pass an agent's key (`countersign keys create --role agent` prints one)")
	}
	if err := CheckPublicKey(publicKey); err != nil {
		return nil, err
	}
	api, err := NewAPI(baseURL, apiKey)
	if err != nil {
		return nil, err
	}
	api.HTTP.Timeout = 30 * time.Second
	return &Client{API: api, PollWait: 20 * time.Second, Now: time.Now, ClockSkew: time.Minute,
		pub: append(ed25519.PublicKey(nil), publicKey...)}, nil
}

// CheckPublicKey says whether pub can be the deployment's receipt key: 32
// bytes, not all zero.
func CheckPublicKey(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("countersign: the public key is %d bytes; an Ed25519 public key is %d (64 hex digits, as `countersign audit pubkey` prints it)", len(pub), ed25519.PublicKeySize)
	}
	for _, b := range pub {
		if b != 0 {
			return nil
		}
	}
	return errors.New("countersign: the public key is all zeros: give the deployment's key (`countersign audit pubkey`)")
}

// ParsePublicKey decodes a public key written in hex, as `countersign audit
// pubkey` and export_public_key print it, and checks it (CheckPublicKey).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("countersign: the public key is not hex: %v (want 64 hex digits, as `countersign audit pubkey` prints it)", err)
	}
	pub := ed25519.PublicKey(b)
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// Action is one call the agent wants to make: confirm_action's arguments.
type Action struct {
	// Tool is the tool to call, as declared in the deployment's config.
	Tool string `json:"tool"`
	// Arguments is the call's arguments, a JSON object (nil: {}). The
	// approval binds exactly these, by SHA-256.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Summary is one or two sentences for the approver.
	Summary string `json:"summary,omitempty"`
	// UserID, AgentID and RunID name the memory space the request belongs
	// to (UserID defaults to "default" on the server). A key with scopes
	// may ask only in the users it names; a session grant binds RunID.
	UserID  string `json:"user_id,omitempty"`
	AgentID string `json:"agent_id,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	// Category is the agent's own description of the call (read-only,
	// mutating, destructive): recorded and shown, never trusted.
	Category string `json:"category,omitempty"`
	// RequestedEffects are the effects the agent expects, one per entry.
	RequestedEffects []string `json:"requested_effects,omitempty"`
	// DryRun is the plan shown to the approver, required for a destructive
	// tool: any JSON value (a string, a struct, a json.RawMessage).
	DryRun any `json:"dry_run,omitempty"`
	// ActionID is an idempotency key: the same ActionID with the same body
	// returns the same request.
	ActionID string `json:"action_id,omitempty"`
	// CallbackURL is where the server POSTs the signed outcome.
	CallbackURL string `json:"callback_url,omitempty"`
	// Headless says no person is on the line: a call that needs a
	// confirmation is then denied at once (unless a standing grant covers
	// it).
	Headless bool `json:"headless,omitempty"`
}

// Outcome is how an approved request was approved.
type Outcome string

// The outcomes of an approval.
const (
	// Approved: run the arguments asked for.
	Approved Outcome = "approved"
	// ApprovedWithChanges: an approver edited the arguments; run
	// Approval.Arguments, not what was asked for.
	ApprovedWithChanges Outcome = "approved_with_changes"
)

// Approval is a verified, approved action: run Tool with exactly
// Arguments, after Redeem.
type Approval struct {
	Outcome   Outcome
	RequestID string
	Tool      string
	// Arguments are the approved arguments: the ones asked for, or the
	// approver's edit (Outcome ApprovedWithChanges). Run exactly these.
	Arguments json.RawMessage
	// Edited is Outcome == ApprovedWithChanges.
	Edited bool
	// Changes describes an edit for people ("drain false → true").
	Changes string
	// ConfirmedBy names the approvers ("alice [prin_…]"), the standing
	// grant, or "" for an automatic approval (read-only).
	ConfirmedBy string
	// Receipt is the signed receipt (redeem it with Redeem); Payload is
	// what it states, verified.
	Receipt string
	Payload receipt.Payload
}

// Denied is the error of a request a person or the automatic policy
// denied (headless, an unanswered request past its timeout is Expired).
type Denied struct {
	RequestID string
	// Reason is the approver's reason, or the automatic policy's.
	Reason string
	// DecidedBy names who denied it; empty for the automatic policy.
	DecidedBy []string
	// Text is the server's sentence for the agent.
	Text string
}

func (e *Denied) Error() string {
	return fmt.Sprintf("countersign: %s was denied: %s", e.RequestID, e.Reason)
}

// Expired is the error of a request nobody decided before its timeout: it
// is denied by automatic policy.
type Expired struct {
	RequestID string
	Reason    string
	Text      string
}

func (e *Expired) Error() string {
	return fmt.Sprintf("countersign: %s expired unanswered: %s", e.RequestID, e.Reason)
}

// NeedsClarification is the answer to a call that lacks required
// arguments: no request was made and nothing is asked of a person. Ask the
// user for Missing instead of guessing, then ask again.
type NeedsClarification struct {
	Tool    string
	Missing []string
	Text    string
}

func (e *NeedsClarification) Error() string {
	return fmt.Sprintf("countersign: %s needs clarification: %s", e.Tool, e.Text)
}

// Pending is the error of a wait that ended before the request was decided
// (the context ended, or the server could not be reached while waiting):
// the request stays pending and decidable. Resume(ctx, RequestID, action)
// waits again.
type Pending struct {
	RequestID string
	// Err is why the wait ended: a context error, an *APIError or a
	// *TransportError.
	Err error
}

func (e *Pending) Error() string {
	return fmt.Sprintf("countersign: %s is still pending (%v); Resume waits for it again", e.RequestID, e.Err)
}

// Unwrap returns why the wait ended.
func (e *Pending) Unwrap() error { return e.Err }

// ErrReceipt is wrapped by every failed receipt check: do not run the
// action.
var ErrReceipt = errors.New("countersign: receipt check failed")

// pollMargin is how much of the context's remaining time a poll leaves
// unused, so that it answers before the deadline cuts it.
const pollMargin = time.Second

// ConfirmAction asks for a confirmation of a and waits (until ctx ends)
// for the decision. On approval it verifies the receipt offline: signed by
// the pinned key, unexpired, for the request the server answered about,
// for a.Tool, and binding either exactly a.Arguments or the approved
// arguments it returns as an edit. For an action without an ActionID, the
// receipt must also be issued after the request was made (within
// ClockSkew), so an answer replayed from an earlier approval is refused. It
// does not redeem (call Redeem right before running).
func (c *Client) ConfirmAction(ctx context.Context, a Action) (*Approval, error) {
	if err := checkAction(&a); err != nil {
		return nil, err
	}
	asked := c.Now()
	ans, err := c.API.Call(ctx, "confirm_action", a)
	if err != nil {
		return nil, err
	}
	if err := ans.Err(); err != nil {
		return nil, err
	}
	var fresh time.Time
	if a.ActionID == "" {
		fresh = asked.Add(-c.ClockSkew)
	}
	id, _ := ans.Data["request_id"].(string)
	return c.settle(ctx, a, id, ans, fresh)
}

// Resume waits again for request id, made for a (which must be the action
// that was asked for: the receipt is checked against it), after a wait
// ended with *Pending.
func (c *Client) Resume(ctx context.Context, requestID string, a Action) (*Approval, error) {
	if err := checkAction(&a); err != nil {
		return nil, err
	}
	if requestID == "" {
		return nil, errors.New("countersign: Resume needs the request id (Pending.RequestID)")
	}
	ans := &Answer{Status: 200, Data: map[string]any{"request_id": requestID, "status": "pending"}}
	return c.settle(ctx, a, requestID, ans, time.Time{})
}

func checkAction(a *Action) error {
	if strings.TrimSpace(a.Tool) == "" {
		return errors.New("countersign: Action.Tool is required")
	}
	if len(a.Arguments) == 0 {
		a.Arguments = json.RawMessage("{}")
	}
	if _, err := receipt.Canonical(a.Arguments); err != nil || firstNonSpace(a.Arguments) != '{' {
		return errors.New("countersign: Action.Arguments must be one JSON object")
	}
	return nil
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c
		}
	}
	return 0
}

// settle follows request id from the answer ans until it is decided or the
// wait ends. fresh, when set, is the earliest issue time a receipt may
// state.
func (c *Client) settle(ctx context.Context, a Action, id string, ans *Answer, fresh time.Time) (*Approval, error) {
	said := false
	for {
		d := ans.Data
		if got, _ := d["request_id"].(string); got != id {
			return nil, fmt.Errorf("%w: the server answered about request %q while asked about %q", ErrReceipt, got, id)
		}
		status, _ := d["status"].(string)
		reason, _ := d["reason"].(string)
		switch status {
		case "approved":
			return c.check(a, id, d, fresh)
		case "denied":
			by, _ := d["decided_by"].([]any)
			return nil, &Denied{RequestID: id, Reason: reason, DecidedBy: strs(by), Text: ans.Text}
		case "expired":
			return nil, &Expired{RequestID: id, Reason: reason, Text: ans.Text}
		case "requires_clarification":
			missing, _ := d["missing"].([]any)
			return nil, &NeedsClarification{Tool: a.Tool, Missing: strs(missing), Text: ans.Text}
		case "pending":
		default:
			return nil, fmt.Errorf("countersign: request %s has status %q, which this client does not know", id, status)
		}
		if id == "" {
			return nil, errors.New("countersign: the server answered pending without a request id")
		}
		if !said && c.OnPending != nil {
			c.OnPending(id)
		}
		said = true
		wait := c.PollWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)-pollMargin)
		}
		if err := ctx.Err(); err != nil {
			return nil, &Pending{RequestID: id, Err: err}
		}
		if wait < time.Second {
			return nil, &Pending{RequestID: id, Err: context.DeadlineExceeded}
		}
		next, err := c.API.Call(ctx, "action_status", map[string]any{"request_id": id, "wait_seconds": int(wait / time.Second)})
		if err == nil {
			err = next.Err()
		}
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, &Pending{RequestID: id, Err: err}
		}
		ans = next
	}
}

// check verifies an approved request's receipt and that it binds request
// id, the tool asked for and the approved arguments.
func (c *Client) check(a Action, id string, d map[string]any, fresh time.Time) (*Approval, error) {
	rec, _ := d["receipt"].(string)
	if rec == "" {
		return nil, fmt.Errorf("%w: the server says %s is approved but sends no receipt", ErrReceipt, id)
	}
	p, err := receipt.Verify(rec, c.pub, c.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReceipt, err)
	}
	if p.RequestID != id || p.Tool != a.Tool {
		return nil, fmt.Errorf("%w: the receipt is for %s %s, not %s %s", ErrReceipt, p.RequestID, p.Tool, id, a.Tool)
	}
	if !fresh.IsZero() && time.Unix(p.IssuedAt, 0).Before(fresh.Truncate(time.Second)) {
		return nil, fmt.Errorf("%w: the receipt was issued at %s, before this request was made (at %s): it answers an earlier request, or the clocks differ by more than %s",
			ErrReceipt, time.Unix(p.IssuedAt, 0).UTC().Format(time.RFC3339), fresh.Add(c.ClockSkew).UTC().Format(time.RFC3339), c.ClockSkew)
	}
	if d["approved_arguments"] == nil {
		return nil, fmt.Errorf("%w: the answer carries no approved_arguments", ErrReceipt)
	}
	approved, err := json.Marshal(d["approved_arguments"])
	if err != nil {
		return nil, fmt.Errorf("%w: approved_arguments: %v", ErrReceipt, err)
	}
	h, err := receipt.ArgsHash(a.Tool, approved)
	if err != nil || h != p.ApprovedArgsSHA256 {
		return nil, fmt.Errorf("%w: the approved arguments do not hash to the receipt's approved_args_sha256", ErrReceipt)
	}
	if firstNonSpace(approved) != '{' {
		return nil, fmt.Errorf("%w: the approved arguments are not a JSON object", ErrReceipt)
	}
	asked, err := receipt.ArgsHash(a.Tool, a.Arguments)
	if err != nil {
		return nil, fmt.Errorf("countersign: arguments are not JSON: %w", err)
	}
	ap := &Approval{Outcome: Approved, RequestID: id, Tool: p.Tool, Arguments: approved,
		Receipt: rec, Payload: p}
	ap.ConfirmedBy, _ = d["confirmed_by"].(string)
	if asked != h {
		ap.Outcome, ap.Edited = ApprovedWithChanges, true
		ap.Changes, _ = d["changes"].(string)
	}
	return ap, nil
}

// Redeem records the approved action as executed (redeem_receipt). It
// succeeds once per receipt; a second redemption is an *APIError with
// Status 409 naming when the first happened.
func (c *Client) Redeem(ctx context.Context, rec string) error {
	ans, err := c.API.Call(ctx, "redeem_receipt", map[string]any{"receipt": rec})
	if err != nil {
		return err
	}
	return ans.Err()
}

func strs(v []any) []string {
	out := make([]string, 0, len(v))
	for _, x := range v {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
