package webhook

import (
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/countersign/countersign/bot"
)

// RateLimiter is a token bucket per principal: each principal may make
// Burst requests at once and PerMinute requests a minute on average.
type RateLimiter struct {
	perSec float64
	burst  float64
	now    func() time.Time

	mu      sync.Mutex
	buckets map[string]*tokenBucket
}

type tokenBucket struct {
	tokens float64
	last   time.Time
}

// maxIdleBuckets is how many buckets the limiter keeps before it forgets
// those that have refilled (a full bucket and a missing one behave alike).
const maxIdleBuckets = 10000

// NewRateLimiter returns a limiter allowing perMinute requests a minute with
// bursts of burst, or nil (no limit) when perMinute is not positive. now is
// the clock (nil: time.Now).
func NewRateLimiter(perMinute, burst int, now func() time.Time) *RateLimiter {
	if perMinute <= 0 {
		return nil
	}
	if burst < 1 {
		burst = 1
	}
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{perSec: float64(perMinute) / 60, burst: float64(burst), now: now, buckets: map[string]*tokenBucket{}}
}

// Allow takes one token from key's bucket. When none is left it reports how
// long until one will be.
func (l *RateLimiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxIdleBuckets {
			l.forgetFull(now)
		}
		b = &tokenBucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(l.burst, b.tokens+elapsed*l.perSec)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.perSec * float64(time.Second))
	return false, wait
}

// forgetFull drops the buckets that would be full by now.
func (l *RateLimiter) forgetFull(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.perSec >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// Middleware limits each authenticated caller (CallerFrom) to its bucket
// and answers 429 with Retry-After (whole seconds, rounded up) when it is
// empty. onLimited, if set, is told each time.
func (l *RateLimiter) Middleware(log *slog.Logger, onLimited func(r *http.Request)) func(http.Handler) http.Handler {
	log = orDiscard(log)
	return func(next http.Handler) http.Handler {
		if l == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := "anonymous"
			if c := CallerFrom(r.Context()); c != nil {
				key = c.ID
			}
			ok, wait := l.Allow(key)
			if !ok {
				secs := int(math.Ceil(wait.Seconds()))
				if secs < 1 {
					secs = 1
				}
				if onLimited != nil {
					onLimited(r)
				}
				w.Header().Set("Retry-After", strconv.Itoa(secs))
				WriteError(w, r, log, bot.Errorf(bot.KindRateLimited, "rate limit exceeded: retry after %d second(s)", secs))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
