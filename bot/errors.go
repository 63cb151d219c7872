package bot

import (
	"errors"
	"fmt"

	"github.com/countersign/countersign/policy"
)

// Kind classifies an error for every surface that reports it: the HTTP API
// maps it to a status code, MCP to an error result, chat to a private reply
// (policy.ErrorKind, shared with the domain packages). It is an alias, not
// a type of its own, so that memory's errors reach the surfaces as they
// are; it is named here because an adapter may not import policy (the
// import rules: who decides is the core's question), and the surfaces
// need the kinds' names.
type Kind = policy.ErrorKind

// The kinds of error a tool call can end in (policy's, under the names
// surfaces use).
const (
	KindInternal        = policy.KindInternal        // a fault of Countersign's; never caused by input
	KindInvalid         = policy.KindInvalid         // bad arguments: 400
	KindUnauthenticated = policy.KindUnauthenticated // missing or unknown key: 401
	KindDenied          = policy.KindDenied          // capability or scope denial: 403
	KindNotFound        = policy.KindNotFound        // unknown tool or item: 404
	KindConflict        = policy.KindConflict        // decided, stale, or in-flight: 409
	KindTooLarge        = policy.KindTooLarge        // body too large: 413
	KindUnprocessable   = policy.KindUnprocessable   // idempotency key reused with another body: 422
	KindRateLimited     = policy.KindRateLimited     // 429
)

// Error is a tool-call failure with a message meant for the caller
// (policy.Error: memory reports its errors with the same type, so they
// reach the surfaces as they are). An alias for the same reason as Kind:
// adapters, which may not import policy, name it here. A refusal by the
// one decision rule carries its *policy.Refusal (Err): errors.Is(err,
// policy.CheckStepUp) tells one, wherever it is asked.
type Error = policy.Error

// Errorf builds an *Error of kind k.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// Invalid reports a bad argument.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err; an error that is not an *Error is internal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
