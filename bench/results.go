package bench

import (
	"fmt"
	"sort"
	"sync"
)

// Results collects one value per round for each metric, keyed like
// "G1.cs.p99" (seconds for latencies, operations per second for rates,
// plain numbers for ratios and sizes).
type Results struct {
	mu    sync.Mutex
	m     map[string]Rounds
	notes []string
}

// NewResults returns an empty collection.
func NewResults() *Results { return &Results{m: map[string]Rounds{}} }

// Put adds one round's value of a metric.
func (r *Results) Put(key string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[key] = append(r.m[key], v)
}

// PutSample adds a round's p50, p99 and max of a latency sample under
// key.p50, key.p99 and key.max (in seconds).
func (r *Results) PutSample(key string, s *Sample) {
	r.Put(key+".p50", s.Quantile(0.5).Seconds())
	r.Put(key+".p99", s.Quantile(0.99).Seconds())
	r.Put(key+".max", s.Max().Seconds())
	r.Put(key+".n", float64(s.Len()))
}

// Get returns the rounds of a metric.
func (r *Results) Get(key string) Rounds {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[key]
}

// Note records a line for the report (what was seen, why a target missed).
func (r *Results) Note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// Keys lists the metrics, sorted.
func (r *Results) Keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
