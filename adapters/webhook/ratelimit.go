package webhook

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/countersign/countersign/bot"
)

// Charger takes one rate token for a caller ahead of a tool call (the bot's
// Charge): the error is KindRateLimited when none is left.
type Charger interface {
	Charge(ctx context.Context, caller *bot.Caller) (context.Context, error)
}

// ChargeCalls returns middleware that takes the rate token of each tool
// call before the layers behind it (Idempotency-Key) do any work, and
// answers 429 with Retry-After (whole seconds) when the caller's bucket is
// empty. The token travels in the request's context to bot.Call, which
// then takes no second one. onLimited, if set, is told each time.
func ChargeCalls(ch Charger, log *slog.Logger, onLimited func(r *http.Request)) func(http.Handler) http.Handler {
	log = orDiscard(log)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, err := ch.Charge(r.Context(), CallerFrom(r.Context()))
			if err != nil {
				if onLimited != nil {
					onLimited(r)
				}
				WriteError(w, r, log, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}
