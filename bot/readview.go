package bot

import (
	"context"
	"strings"
	"sync"
)

// A page view that reads through several audited tools (the console's
// Memory page runs check_before_act once per subject) records one entry
// for the view, not one per call: the page gathers its calls' read
// entries with CollectReads and records them together (ReadCollector.Record)
// before it shows any of their answers, so nothing is shown that is not
// recorded, and the trail is not buried under one entry per subject.

type collectKey struct{}

// ReadCollector gathers the read entries of the calls made with its
// context (CollectReads). It is safe for concurrent use.
type ReadCollector struct {
	mu      sync.Mutex
	details []string
}

// CollectReads returns a context under which Call.AuditRead does not
// record its entry but adds it to the returned collector. Only a surface
// that records the collector (Record) before it shows the answers may use
// it; the context is never taken from a request.
func CollectReads(ctx context.Context) (context.Context, *ReadCollector) {
	rc := &ReadCollector{}
	return context.WithValue(ctx, collectKey{}, rc), rc
}

func collectorOf(ctx context.Context) *ReadCollector {
	rc, _ := ctx.Value(collectKey{}).(*ReadCollector)
	return rc
}

func (rc *ReadCollector) add(action, detail string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.details = append(rc.details, action+" "+detail)
}

// length is how many read entries were gathered.
func (rc *ReadCollector) length() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.details)
}

// maxViewDetail bounds the detail of a view's one entry.
const maxViewDetail = 4000

// Record writes the gathered entries as one audit entry of action (for
// example web_view) for caller in sp, what prefixing the reads ("memory
// page"), durably, before the answers are shown. Nothing gathered: nothing
// written. An error means the view is not recorded, and its answers must
// not be shown.
func (rc *ReadCollector) Record(ctx context.Context, b *Bot, caller *Caller, sp Space, action, what string) error {
	rc.mu.Lock()
	details := append([]string(nil), rc.details...)
	rc.mu.Unlock()
	if len(details) == 0 {
		return nil
	}
	detail := what + ": " + strings.Join(details, "; ")
	if len(detail) > maxViewDetail {
		detail = strings.ToValidUTF8(detail[:maxViewDetail], "") + "…"
	}
	return b.Chat().Audit(ctx, caller, sp, action, detail)
}
