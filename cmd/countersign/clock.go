package main

import (
	"context"
	"time"
)

// clockKey carries a clock in the context run() is called with.
type clockKey struct{}

// withClock returns ctx carrying now as the server's clock: the end-to-end
// tests run the real server on a settable clock (a grant's expiry, a
// request's timeout) without waiting for real time to pass.
func withClock(ctx context.Context, now func() time.Time) context.Context {
	return context.WithValue(ctx, clockKey{}, now)
}

// clockFrom is the clock ctx carries, or nil (the bot then uses
// time.Now).
func clockFrom(ctx context.Context) func() time.Time {
	now, _ := ctx.Value(clockKey{}).(func() time.Time)
	return now
}
