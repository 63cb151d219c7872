package mcp

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sealed values the server hands a client and must verify when they come
// back: an MRTR requestState and a task id. Both travel through the
// client, so they are attacker-controlled input: each is a JSON payload
// and an HMAC-SHA256 over its kind and payload, under a key every replica
// shares (Options.StateKey). Sealed, not encrypted: the payload holds no
// secret (a request id the caller already knows, the caller's principal
// id, times).

// StateKey derives the key that seals requestStates and task ids from the
// audit signing key's seed, so that every replica (they share the signing
// key) verifies what any of them issued, and a new signing key
// invalidates every outstanding one.
func StateKey(seed []byte) []byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte("countersign mcp request state v1"))
	return m.Sum(nil)
}

// sealKinds separate the two uses, so that a task id is never accepted as
// a requestState or the reverse.
const (
	kindState = "csrs1" // an MRTR requestState
	kindTask  = "cstk1" // a task id
)

// maxSealed bounds a sealed value read back from a client.
const maxSealed = 2048

// stateTTL is how long a requestState may be echoed back: the client
// retries at once (it holds no input requests for long), so a few minutes
// bound a replay without cutting a retry short.
const stateTTL = 5 * time.Minute

// errSealed is any sealed value that does not verify: malformed, altered,
// made with another key, or of the other kind.
var errSealed = errors.New("not issued by this server (malformed, altered or made with another key)")

// sealer seals and opens values under one key.
type sealer struct{ key []byte }

// newSealer returns a sealer for key, or for a fresh random key when key
// is empty (one process: values do not survive a restart).
func newSealer(key []byte) sealer {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	return sealer{key: key}
}

func (s sealer) mac(kind string, payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)
}

// seal returns kind.payload.mac, payload being v as JSON.
func (s sealer) seal(kind string, v any) (string, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return kind + "." + enc.EncodeToString(payload) + "." + enc.EncodeToString(s.mac(kind, payload)), nil
}

// open checks a sealed value of kind and decodes its payload into v.
func (s sealer) open(kind, sealed string, v any) error {
	if len(sealed) > maxSealed {
		return errSealed
	}
	k, rest, ok := strings.Cut(sealed, ".")
	if !ok || k != kind {
		return errSealed
	}
	p64, m64, ok := strings.Cut(rest, ".")
	if !ok {
		return errSealed
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p64)
	sum, err2 := enc.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(sum, s.mac(kind, payload)) {
		return errSealed
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errSealed
	}
	return nil
}

// requestState is what a pending confirm_action remembers between MRTR
// rounds: which request it waits for, for whom, on which call, until when.
type requestState struct {
	Request   string `json:"r"` // the approval request (req_…)
	Principal string `json:"p"` // the caller's principal id
	Tool      string `json:"t"` // the tool called (confirm_action)
	Args      string `json:"a"` // argsDigest of its arguments
	Expires   int64  `json:"e"` // unix seconds
	// Asked is set once the URL elicitation of a step-up item was sent, so
	// that it is asked once, not at every round.
	Asked bool `json:"u,omitempty"`
}

// taskHandle is what a task id holds: the request it follows, for whom,
// since when. A task lives as long as its request: it needs no storage of
// its own, and any replica answers for it.
type taskHandle struct {
	Request   string `json:"r"`
	Principal string `json:"p"`
	Created   int64  `json:"c"` // unix milliseconds
	// Tool is the served name of the upstream tool whose gated call the
	// task is (the gateway's: its result is the upstream's answer, once
	// approved and forwarded); empty for confirm_action's.
	Tool string `json:"t,omitempty"`
}

// argsDigest is the SHA-256 of the arguments in a canonical JSON form
// (object keys sorted, numbers as written), so that a retry of the same
// call matches whatever key order the client sends.
func argsDigest(args json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	canon := []byte(strings.TrimSpace(string(args)))
	if len(canon) > 0 && dec.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// stateError says why a requestState was refused; the request it names,
// if its seal verified, is still in the store.
type stateError struct {
	msg string
}

func (e *stateError) Error() string { return e.msg }

// openState verifies an echoed requestState for the caller's call of tool
// with args at now.
func (s sealer) openState(sealed, principal, tool string, args json.RawMessage, now time.Time) (requestState, error) {
	var st requestState
	if err := s.open(kindState, sealed, &st); err != nil {
		return requestState{}, &stateError{"requestState refused: " + err.Error() + ". Send the call again without requestState to start over."}
	}
	switch {
	case st.Principal != principal:
		return requestState{}, &stateError{"requestState refused: it was issued to another principal. Send the call again without requestState to start over."}
	case st.Tool != tool || st.Args != argsDigest(args):
		return requestState{}, &stateError{"requestState refused: it was issued for another call (a different tool or different arguments). Retry the original call exactly, or send this one without requestState."}
	case now.Unix() > st.Expires:
		return requestState{}, &stateError{fmt.Sprintf("requestState refused: it expired at %s. Request %s is still in the store: call action_status with request_id %s to see whether it was decided.", time.Unix(st.Expires, 0).UTC().Format(time.RFC3339), st.Request, st.Request)}
	}
	return st, nil
}
