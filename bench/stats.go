// Package bench measures Countersign against the targets of
// shared/reference/perf-targets.md: in process, over loopback HTTP against
// the real binary, and side by side with Open Policy Agent and a bare bbolt
// loop. It lives in its own module so that the countersign binary never
// depends on OPA. Run it with `go run ./cmd/benchrun` from this directory.
package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Sample is a set of latencies of one kind of operation in one round.
type Sample struct {
	d []time.Duration
}

// Add records one latency.
func (s *Sample) Add(d time.Duration) { s.d = append(s.d, d) }

// Len is the number of latencies recorded.
func (s *Sample) Len() int { return len(s.d) }

// Merge adds every latency of o.
func (s *Sample) Merge(o *Sample) { s.d = append(s.d, o.d...) }

// Quantile returns the q-quantile (0..1), by the nearest-rank method.
func (s *Sample) Quantile(q float64) time.Duration {
	if len(s.d) == 0 {
		return 0
	}
	if !slices.IsSorted(s.d) {
		slices.Sort(s.d)
	}
	i := int(math.Ceil(q*float64(len(s.d)))) - 1
	return s.d[min(max(i, 0), len(s.d)-1)]
}

// Max returns the largest latency.
func (s *Sample) Max() time.Duration { return s.Quantile(1) }

// Rounds collects one value per round of a metric.
type Rounds []float64

// Median returns the median of the rounds.
func (r Rounds) Median() float64 {
	if len(r) == 0 {
		return math.NaN()
	}
	c := slices.Clone(r)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// Worst returns the largest round.
func (r Rounds) Worst() float64 {
	if len(r) == 0 {
		return math.NaN()
	}
	return slices.Max(r)
}

// Least returns the smallest round.
func (r Rounds) Least() float64 {
	if len(r) == 0 {
		return math.NaN()
	}
	return slices.Min(r)
}

// us renders a duration in seconds as microseconds or milliseconds.
func us(sec float64) string {
	switch {
	case math.IsNaN(sec):
		return "—"
	case sec < 1e-3:
		return fmt.Sprintf("%.1f µs", sec*1e6)
	case sec < 1:
		return fmt.Sprintf("%.2f ms", sec*1e3)
	}
	return fmt.Sprintf("%.2f s", sec)
}

// rate renders operations per second.
func rate(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	if x >= 1000 {
		return fmt.Sprintf("%.1fk/s", x/1000)
	}
	return fmt.Sprintf("%.0f/s", x)
}
