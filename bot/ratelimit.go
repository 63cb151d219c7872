package bot

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// RateLimiter is a token bucket per principal: each principal may make
// Burst tool calls at once and PerMinute calls a minute on average. The bot
// takes one token for every tool call, whatever the surface (HTTP, MCP
// single messages, chat, CLI), in Call; protocol handshakes and health
// checks take none.
type RateLimiter struct {
	perSec float64
	burst  float64
	now    func() time.Time

	// shared, when set, holds the buckets where every replica takes from
	// them (SharedRateLimiter); the map below is then unused.
	shared TokenBuckets
	name   string

	mu      sync.Mutex
	buckets map[string]*tokenBucket
}

// TokenBuckets holds token buckets outside the process, so that replicas
// sharing a store share each principal's limit: a key's limit is the same
// with one replica or five (adapters/postgres.RateLimits).
type TokenBuckets interface {
	// Take takes one token from the bucket key of the limiter name, which
	// refills perSec tokens a second up to burst, at now. When none is
	// left it reports how long until one will be. An error (the store
	// cannot be reached) refuses the call: no limit is skipped.
	Take(ctx context.Context, name, key string, perSec float64, burst int, now time.Time) (ok bool, retryAfter time.Duration, err error)
}

type tokenBucket struct {
	tokens float64
	last   time.Time
}

// maxIdleBuckets is how many buckets the limiter keeps before it forgets
// those that have refilled (a full bucket and a missing one behave alike).
const maxIdleBuckets = 10000

// NewRateLimiter returns a limiter allowing perMinute calls a minute with
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

// SharedRateLimiter is NewRateLimiter with its buckets held in buckets,
// under name (one name per limiter: "calls", "mcp_protocol"), instead of in
// this process. It is nil (no limit) when perMinute is not positive.
func SharedRateLimiter(name string, perMinute, burst int, now func() time.Time, buckets TokenBuckets) *RateLimiter {
	l := NewRateLimiter(perMinute, burst, now)
	if l != nil {
		l.shared, l.name = buckets, name
	}
	return l
}

// allowCtx is Allow through the limiter's buckets wherever they are held;
// err is the shared store's (kv.ErrUnavailable), and refuses the call.
func (l *RateLimiter) allowCtx(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error) {
	if l == nil {
		return true, 0, nil
	}
	if l.shared != nil {
		return l.shared.Take(ctx, l.name, key, l.perSec, int(l.burst), l.now())
	}
	ok, retryAfter = l.Allow(key)
	return ok, retryAfter, nil
}

// Allow takes one token from key's bucket in this process (a shared
// limiter's buckets are taken from with allowCtx). When none is left it reports how
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

// take takes one token for caller, or returns the KindRateLimited error
// that every surface reports (HTTP: 429 with Retry-After).
func (l *RateLimiter) take(ctx context.Context, caller *Caller) error {
	key := "anonymous"
	if caller != nil {
		key = caller.ID
	}
	ok, wait, err := l.allowCtx(ctx, key)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	e := Errorf(KindRateLimited, "rate limit exceeded: retry after %d second(s)", secs)
	e.RetryAfter = secs
	return e
}

// SetRateLimiter makes every tool call take a token from l (nil: no limit).
// Call it while wiring, before serving.
func (b *Bot) SetRateLimiter(l *RateLimiter) { b.limiter = l }

// Prepaid is a rate token taken ahead of a tool call by a surface that must
// answer a refusal before the call is decoded (the HTTP edge answers 429
// before the Idempotency-Key layer writes anything). The next Call whose
// context carries it uses it instead of taking another; it pays for one
// call only.
type Prepaid struct{ used atomic.Bool }

type prepaidKey struct{}

// Charge takes one rate token for caller ahead of a tool call and returns
// ctx carrying it (see Prepaid), or the KindRateLimited error.
func (b *Bot) Charge(ctx context.Context, caller *Caller) (context.Context, error) {
	return b.limiter.Charge(ctx, caller)
}

// Charge takes one token for caller and returns ctx carrying it (see
// Prepaid), or the KindRateLimited error. A nil limiter charges nothing.
func (l *RateLimiter) Charge(ctx context.Context, caller *Caller) (context.Context, error) {
	if l == nil {
		return ctx, nil
	}
	if err := l.take(ctx, caller); err != nil {
		return ctx, err
	}
	return WithPrepaid(ctx, &Prepaid{}), nil
}

// PrepaidFrom returns the token ctx carries, if any (for a surface that
// hands the call to another goroutine with another context).
func PrepaidFrom(ctx context.Context) *Prepaid {
	p, _ := ctx.Value(prepaidKey{}).(*Prepaid)
	return p
}

// WithPrepaid returns ctx carrying p (nil: ctx unchanged).
func WithPrepaid(ctx context.Context, p *Prepaid) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, prepaidKey{}, p)
}

// pay takes the call's token: the prepaid one ctx carries if it is unused,
// else a new one from the limiter.
func (b *Bot) pay(ctx context.Context, caller *Caller) error {
	if b.limiter == nil {
		return nil
	}
	if p := PrepaidFrom(ctx); p != nil && p.used.CompareAndSwap(false, true) {
		return nil
	}
	return b.limiter.take(ctx, caller)
}
