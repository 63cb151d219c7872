package actiontools

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// The Standard Webhooks headers of a callback.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a callback's timestamp may be from the
// receiver's clock (Standard Webhooks, Stripe, Slack: five minutes).
const DefaultTolerance = 5 * time.Minute

// Errors of Verify.
var (
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrTimestamp      = errors.New("webhook: timestamp outside the tolerance")
	ErrSignature      = errors.New("webhook: no matching signature")
)

// ParseSecret reads a callback signing secret: "whsec_<base64>" (the
// Standard Webhooks form) is decoded to its bytes; any other non-empty
// string is used as it is.
func ParseSecret(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("the secret is empty")
	}
	if rest, ok := strings.CutPrefix(s, "whsec_"); ok {
		b, err := base64.StdEncoding.DecodeString(rest)
		if err != nil || len(b) == 0 {
			return nil, errors.New("a whsec_ secret must be followed by base64 (for example whsec_ plus 32 random bytes in base64)")
		}
		return b, nil
	}
	return []byte(s), nil
}

// Sign returns the Standard Webhooks signature of one message:
// "v1," + base64(HMAC-SHA256(secret, id + "." + timestamp + "." + body)).
func Sign(secret []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Verify checks a callback as a receiver should: the three headers are
// present, the timestamp is within tolerance of now (0 means
// DefaultTolerance), and one of the space-separated v1 signatures matches
// the raw body (compared in constant time). Deduplicate on webhook-id:
// a retried delivery carries the same id.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrTimestamp
	}
	want := []byte(Sign(secret, id, sec, body))
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), want) {
			return nil
		}
	}
	return ErrSignature
}

// Payload is the body of a callback.
type Payload struct {
	Type      string         `json:"type"`      // action.decided, question.decided, consent.decided
	Timestamp string         `json:"timestamp"` // when it was decided
	Data      map[string]any `json:"data"`      // the same fields as action_status
}

// callbackSecret is the secret that signs the callbacks of principal id's
// requests: its own (NewCallbackSecret), or, for a principal created before
// per-principal secrets, the deployment's callbacks.secret_env (nil: none).
// Each principal's own secret means that no agent can sign a callback
// another agent's receiver accepts.
func (s *Service) callbackSecret(ctx context.Context, id string) ([]byte, error) {
	var own []byte
	if id != "" {
		err := s.b.View(ctx, func(tx kv.Tx) error {
			var err error
			own, err = s.b.CallbackSecretOf(tx, id)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if len(own) > 0 {
		return own, nil
	}
	return s.o.CallbackSecret, nil
}

// CallbackID is the webhook-id of a request's event: stable across
// retries and restarts, so receivers deduplicate on it.
func CallbackID(requestID, event string) string { return "cs_" + requestID + "_" + event }

// DeliverCallback posts one outbox event of the callback sink: the signed
// outcome of a decided request. A 2xx is delivered; 408, 429, 5xx and
// network errors are retried with backoff; any other answer is permanent.
func (s *Service) DeliverCallback(ctx context.Context, ev bot.Event) error {
	if ev.Type != bot.EventDecided {
		return nil
	}
	var r *approvals.Request
	err := s.b.View(ctx, func(tx kv.Tx) error {
		rec, err := bot.LoadItemRecord(tx, ev.ItemID)
		if err != nil || rec == nil {
			return err
		}
		r, err = approvals.LoadRequest(tx, rec.Key)
		return err
	})
	if err != nil {
		return err
	}
	if r == nil {
		return &bot.PermanentError{Err: fmt.Errorf("callback for item %d: no such request", ev.ItemID)}
	}
	if r.CallbackURL == "" {
		return nil
	}
	secret, err := s.callbackSecret(ctx, r.Requester.ID)
	if errors.Is(err, bot.ErrSecretSealedElsewhere) {
		return &bot.PermanentError{Err: fmt.Errorf("callback for %s: requester %s: %w", r.ID, r.Requester.ID, err)}
	}
	if err != nil {
		return err
	}
	if len(secret) == 0 {
		return &bot.PermanentError{Err: fmt.Errorf("callback for %s: the requester %s has no callback secret and callbacks.secret_env is not set", r.ID, r.Requester.ID)}
	}
	u, err := url.Parse(r.CallbackURL)
	if err != nil || !s.hostAllowed(u) {
		return &bot.PermanentError{Err: fmt.Errorf("callback for %s: %q is no longer allowed by callbacks.allowed_hosts", r.ID, r.CallbackURL)}
	}
	body, err := json.Marshal(Payload{Type: string(r.Kind) + ".decided", Timestamp: stamp(r.DecidedAt), Data: s.requestData(requesterView(r), r)})
	if err != nil {
		return &bot.PermanentError{Err: err}
	}
	id := CallbackID(r.ID, ev.Type)
	ts := s.b.Now().Unix()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, r.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return &bot.PermanentError{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Countersign-Webhooks/1")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(secret, id, ts, body))
	resp, err := s.client.Do(req)
	if err != nil {
		return &bot.UnavailableError{Err: fmt.Errorf("callback for %s: %w", r.ID, err)}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return classify(r.ID, resp)
}

// classify maps a receiver's answer to the outbox's kinds of failure: a
// 408 or 429 retries after its Retry-After, another 3xx or 4xx is
// permanent, and anything else (5xx) says the receiver is down: retried
// until it is back, never given up.
func classify(id string, resp *http.Response) error {
	code := resp.StatusCode
	err := fmt.Errorf("callback for %s: receiver answered %s", id, resp.Status)
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
		after := time.Duration(0)
		if sec, perr := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); perr == nil && sec > 0 {
			after = min(time.Duration(sec)*time.Second, time.Hour)
		}
		return &bot.RetryAfterError{After: after, Err: err}
	case code >= 300 && code < 500:
		// Redirects are not followed: a redirect could lead off the
		// allowed hosts. Other 4xx will not change on a retry.
		return &bot.PermanentError{Err: err}
	}
	return &bot.UnavailableError{Err: err}
}
