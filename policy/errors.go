package policy

// ErrorKind classifies an error for every surface that reports it: the HTTP
// API maps it to a status code, MCP to an error result, chat to a private
// reply. The domain packages (memory) and the core (bot) report with the
// same kinds, so nothing translates one error type into another.
type ErrorKind int

// The kinds of error a tool call can end in.
const (
	KindInternal        ErrorKind = iota // a fault of Countersign's; never caused by input
	KindInvalid                          // bad arguments: 400
	KindUnauthenticated                  // missing or unknown key: 401
	KindDenied                           // capability or scope denial: 403
	KindNotFound                         // unknown tool or item: 404
	KindConflict                         // decided, stale, or in-flight: 409
	KindTooLarge                         // body too large: 413
	KindUnprocessable                    // idempotency key reused with another body: 422
	KindRateLimited                      // 429
)

// Error is a failure with a message meant for the caller (bot.Error is the
// same type, under the name surfaces use).
type Error struct {
	Kind  ErrorKind
	Field string // the argument at fault, for KindInvalid
	Msg   string // what is wrong and how to fix it; shown to the caller
	Data  any    // optional structured detail (for example the recorded outcome on a conflict)
	// RetryAfter is, for KindRateLimited, how many seconds until a retry
	// can succeed (HTTP: the Retry-After header).
	RetryAfter int
	// Err is the typed cause, when there is one: the *Refusal of a
	// decision the one rule refused. errors.Is and errors.As see it.
	Err error
}

// Unwrap returns the typed cause (nil for none).
func (e *Error) Unwrap() error { return e.Err }

// Error returns the message, prefixed by the field at fault.
func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}
