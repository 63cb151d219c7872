package webhook

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/prometheus/client_golang/prometheus"
)

type noStats struct{}

func (noStats) PendingByKind(context.Context) (map[bot.ItemKind]int, error) { return nil, nil }
func (noStats) PendingOldest(context.Context) (time.Duration, error)        { return 0, nil }
func (noStats) OutboxStats(context.Context) (map[string]bot.OutboxStat, error) {
	return nil, nil
}

// BenchmarkObserve is what the metrics cost one successful tool call over
// HTTP: its call and its request.
func BenchmarkObserve(b *testing.B) {
	m, err := NewMetrics(prometheus.NewRegistry(), noStats{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ev := bot.CallEvent{Tool: "check_before_act", Capability: "read", Caller: &bot.Caller{Surface: "http"}, Duration: 90 * time.Microsecond}
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveCall(ev)
		m.ObserveRequest("POST /v1/tools/{name}", http.StatusOK, 0)
	}
}
