package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// MaxAnswerBytes bounds the body of one answer the API client reads; a
// larger answer is an error, never silently cut.
const MaxAnswerBytes = 64 << 20

// API is the HTTP client of one deployment's tool API: POST
// /v1/tools/{tool} with the key as a bearer token, and GET /readyz. Client,
// the Claude Code hook and `countersign call` and `ready` all make their
// calls through it.
type API struct {
	base string
	key  string
	// HTTP sends the requests; NewAPI sets a client with a 5-minute
	// timeout (a long poll waits at most 60 seconds).
	HTTP *http.Client
}

// NewAPI returns the API client of the deployment at baseURL (an http or
// https URL such as https://countersign.example.com) calling with apiKey
// ("" calls without a key: only a deployment without auth answers then).
func NewAPI(baseURL, apiKey string) (*API, error) {
	base := strings.TrimRight(strings.TrimSpace(baseURL), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("countersign: the server URL %q is not an http or https URL with a host (for example http://127.0.0.1:8080)", baseURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("countersign: the server URL %q must not carry credentials, a query or a fragment (the key goes in the Authorization header)", baseURL)
	}
	if strings.ContainsAny(apiKey, " \t\r\n") {
		return nil, errors.New("countersign: the API key contains white space; pass it exactly as `countersign keys create` printed it")
	}
	return &API{base: base, key: apiKey, HTTP: &http.Client{Timeout: 5 * time.Minute}}, nil
}

// URL is the deployment's base URL, as given to NewAPI without a trailing
// slash.
func (a *API) URL() string { return a.base }

// Answer is one answer of the tool API, whatever its status.
type Answer struct {
	// Status is the HTTP status code.
	Status int
	// Text is the answer's text for people (and models).
	Text string
	// Data is the answer's structured data, numbers kept as written
	// (json.Number), so arguments hash as the server hashed them.
	Data map[string]any
	// Error and Field are a refusal's message ("field: what is wrong") and
	// the argument at fault, on a non-200 answer.
	Error string
	Field string
	// Raw is the body exactly as received.
	Raw []byte
}

// OK reports whether the answer is a 2xx.
func (ans *Answer) OK() bool { return ans.Status/100 == 2 }

// Err is nil for a 2xx answer and an *APIError for any other.
func (ans *Answer) Err() error {
	if ans.OK() {
		return nil
	}
	return &APIError{Status: ans.Status, Message: ans.Error, Field: ans.Field, Data: ans.Data}
}

// APIError is a non-2xx answer of the server: Status is the HTTP status,
// Message says what is wrong and how to fix it (prefixed by the field at
// fault), Field names the argument, and Data is the structured detail some
// refusals carry (the existing request of a 409).
type APIError struct {
	Status  int
	Message string
	Field   string
	Data    map[string]any
}

func (e *APIError) Error() string {
	return fmt.Sprintf("countersign: HTTP %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// TransportError is a call that got no Countersign answer: no connection,
// a timeout, or a body that is not the tool API's JSON.
type TransportError struct {
	Tool string
	Err  error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("countersign: %s: %v", e.Tool, e.Err)
}

// Unwrap returns the underlying error (a context error on cancellation).
func (e *TransportError) Unwrap() error { return e.Err }

// Call posts args to tool and returns the answer, whatever its status: a
// non-2xx answer is an Answer (see Answer.Err), not an error. The error is
// a *TransportError when no Countersign answer arrived. args is marshalled
// to JSON, except a json.RawMessage, which is sent as it is; nil sends {}.
func (a *API) Call(ctx context.Context, tool string, args any) (*Answer, error) {
	var body []byte
	switch v := args.(type) {
	case nil:
		body = []byte("{}")
	case json.RawMessage:
		body = v
	default:
		var err error
		if body, err = json.Marshal(args); err != nil {
			return nil, fmt.Errorf("countersign: %s: the arguments cannot be encoded as JSON: %w", tool, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/v1/tools/"+url.PathEscape(tool), bytes.NewReader(body))
	if err != nil {
		return nil, &TransportError{Tool: tool, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return nil, &TransportError{Tool: tool, Err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return nil, &TransportError{Tool: tool, Err: fmt.Errorf("reading the answer: %w", unwrapURLError(err))}
	}
	if len(raw) > MaxAnswerBytes {
		return nil, &TransportError{Tool: tool, Err: fmt.Errorf("HTTP %d: the answer is larger than %d bytes", resp.StatusCode, MaxAnswerBytes)}
	}
	ans := &Answer{Status: resp.StatusCode, Raw: raw}
	var out struct {
		Text  string         `json:"text"`
		Data  map[string]any `json:"data"`
		Error string         `json:"error"`
		Field string         `json:"field"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, &TransportError{Tool: tool, Err: fmt.Errorf("HTTP %d, and the answer is not Countersign's JSON (is the URL %s a Countersign server?)", resp.StatusCode, a.base)}
	}
	ans.Text, ans.Data, ans.Error, ans.Field = out.Text, out.Data, out.Error, out.Field
	if ans.Data == nil {
		ans.Data = map[string]any{}
	}
	return ans, nil
}

// Ready asks GET /readyz once: nil when the server answers 200.
func (a *API) Ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return unwrapURLError(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

// WaitReady asks GET /readyz every interval until the server answers 200
// (nil) or ctx ends; then the error is the last answer's, or the context's
// when none came.
func (a *API) WaitReady(ctx context.Context, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		last := a.Ready(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return last
		case <-tick.C:
		}
	}
}

// Message is what an answer says to a person: a refusal's message, else
// the text, else the body as received.
func (ans *Answer) Message() string {
	if !ans.OK() && ans.Error != "" {
		return ans.Error
	}
	if ans.Text != "" {
		return ans.Text
	}
	return strings.TrimRight(string(ans.Raw), "\n")
}

// DataField is one field of the answer's data as a script reads it: a string
// as it is, anything else as JSON (numbers as written). A field the data
// does not hold is an error that names the fields it does hold.
func (ans *Answer) DataField(name string) (string, error) {
	v, ok := ans.Data[name]
	if !ok {
		names := make([]string, 0, len(ans.Data))
		for k := range ans.Data {
			names = append(names, k)
		}
		sort.Strings(names)
		return "", fmt.Errorf("the answer's data has no field %q (it has: %s)", name, strings.Join(names, ", "))
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// unwrapURLError drops net/http's *url.Error wrapper, which repeats the
// method and URL in every message.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
