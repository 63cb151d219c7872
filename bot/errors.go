package bot

import (
	"errors"
	"fmt"
)

// Kind classifies an error for every surface that reports it: the HTTP API
// maps it to a status code, MCP to an error result, chat to a private reply.
type Kind int

// The kinds of error a tool call can end in.
const (
	KindInternal        Kind = iota // a fault of Countersign's; never caused by input
	KindInvalid                     // bad arguments: 400
	KindUnauthenticated             // missing or unknown key: 401
	KindDenied                      // capability or scope denial: 403
	KindNotFound                    // unknown tool or item: 404
	KindConflict                    // decided, stale, or in-flight: 409
	KindTooLarge                    // body too large: 413
	KindUnprocessable               // idempotency key reused with another body: 422
	KindRateLimited                 // 429
)

// Error is a tool-call failure with a message meant for the caller.
type Error struct {
	Kind  Kind
	Field string // the argument at fault, for KindInvalid
	Msg   string // what is wrong and how to fix it; shown to the caller
	Data  any    // optional structured detail (for example the recorded outcome on a conflict)
	// RetryAfter is, for KindRateLimited, how many seconds until a retry
	// can succeed (HTTP: the Retry-After header).
	RetryAfter int
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}

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
