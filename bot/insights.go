package bot

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// The figures of the console's Insights page and of /metrics: the queue by
// age, decisions per day by outcome, time to decision per tool, approvals
// made very soon after the card appeared (possible rubber-stamping), all
// within what a reader may see (its scopes), read from the store.

// QuickApproval is how soon after its card appeared an approval is
// flagged as possibly made without reading it. Only a person's approval on
// a surface that shows the card counts (onSurface): an approval over the
// API is a program's call, whose speed says nothing of reading.
const QuickApproval = 5 * time.Second

// onSurface reports whether a decision was a person's on a surface that
// shows the item (chat, the console): one cast on a card or page (seen),
// or authenticated as a surface authenticates (a chat identity, a console
// session). An API key's or an OAuth token's, and one recorded before
// decisions carried their assurance, are not.
func onSurface(a policy.Assurance, seen *Seen) bool {
	return seen != nil || a != "" && a != policy.AssuranceKey
}

// Bounds of Insights: the days it covers (DefaultInsightDays, at most
// MaxInsightDays) and the records one reading scans (the newest first).
const (
	DefaultInsightDays = 14
	MaxInsightDays     = 90
	insightScan        = 5000
)

// AgeBucket is one bar of the queue by age: the open items whose age is
// under Below (and at least the previous bucket's); Below 0 is the last,
// open-ended bucket.
type AgeBucket struct {
	Label string
	Below time.Duration
	N     int
}

// DayOutcomes are the decisions of one day (UTC) by outcome.
type DayOutcomes struct {
	Day                                        string // 2026-12-01
	Approved, Edited, Denied, Expired, Granted int
}

// Total is the day's decisions.
func (d DayOutcomes) Total() int { return d.Approved + d.Edited + d.Denied + d.Expired + d.Granted }

// ToolLatency is how long decisions by people took for one tool (or kind
// of item): from the card's appearing to the decision.
type ToolLatency struct {
	Tool        string
	N           int
	Median, P90 time.Duration
}

// ApproverSpeed is one approver's approvals and how many of them came
// within QuickApproval of the card appearing.
type ApproverSpeed struct {
	Name             string
	Approvals, Quick int
}

// Insights are the figures of one reading.
type Insights struct {
	Now  time.Time
	Days int
	// Queue is the open items by age; Open how many, Oldest the age of the
	// oldest (OpenCapped: more than insightScan, counted up to it).
	Queue      []AgeBucket
	Open       int
	OpenCapped bool
	Oldest     time.Duration
	// Decisions has one entry per day of the period, oldest first.
	Decisions []DayOutcomes
	// Latency is per tool, by name; Approvers by most quick approvals.
	Latency   []ToolLatency
	Approvers []ApproverSpeed
	// Capped says the decided items or requests of the period were more
	// than one reading scans: the figures cover the newest of them.
	Capped bool
}

// ageBuckets are the queue chart's bars.
var ageBuckets = []AgeBucket{
	{Label: "under 5 min", Below: 5 * time.Minute},
	{Label: "5–30 min", Below: 30 * time.Minute},
	{Label: "30 min–2 h", Below: 2 * time.Hour},
	{Label: "2–12 h", Below: 12 * time.Hour},
	{Label: "12–24 h", Below: 24 * time.Hour},
	{Label: "1–7 days", Below: 7 * 24 * time.Hour},
	{Label: "over 7 days"},
}

// Insights reads the figures reader may see (the read capability, the
// spaces of its scopes) for the last days days (0: DefaultInsightDays).
func (x Items) Insights(ctx context.Context, reader *Caller, days int) (Insights, error) {
	b := x.b
	if days <= 0 {
		days = DefaultInsightDays
	}
	days = min(days, MaxInsightDays)
	now := b.now()
	in := Insights{Now: now, Days: days, Queue: slices.Clone(ageBuckets)}
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	since := today.AddDate(0, 0, -(days - 1))
	for d := range days {
		in.Decisions = append(in.Decisions, DayOutcomes{Day: since.AddDate(0, 0, d).Format(time.DateOnly)})
	}
	if !reader.MayRead() {
		return in, nil
	}
	if err := x.queueAges(ctx, reader, &in); err != nil {
		return in, err
	}
	spaces := readerSpaces(reader)
	inScope := func(sp Space) bool { return spaces == nil || slices.Contains(spaces, sp.UserID) }
	day := func(t time.Time) *DayOutcomes {
		i := int(t.UTC().Sub(since) / (24 * time.Hour))
		if t.Before(since) || i >= len(in.Decisions) {
			return nil
		}
		return &in.Decisions[i]
	}
	latency := map[string][]time.Duration{}
	speed := map[string]*ApproverSpeed{}
	approved := func(name string, at, shown time.Time) {
		if name == "" || strings.HasPrefix(name, "countersign") {
			return
		}
		s := speed[name]
		if s == nil {
			s = &ApproverSpeed{Name: name}
			speed[name] = s
		}
		s.Approvals++
		if at.Sub(shown) < QuickApproval {
			s.Quick++
		}
	}
	err := b.store.View(ctx, func(tx kv.Tx) error {
		// Items decided by people (and expired), newest first, made within
		// the period.
		scanned := 0
		err := tx.Descend(bucketItems, nil, nil, func(k, v []byte) error {
			if scanned++; scanned > insightScan {
				in.Capped = true
				return kv.ErrStop
			}
			rec, err := LoadItemRecord(tx, kv.ParseU64(k))
			if err != nil || rec == nil {
				return err
			}
			if rec.CreatedAt.Before(since) {
				return kv.ErrStop
			}
			if !inScope(rec.Space) {
				return nil
			}
			it, err := b.viewOf(tx, rec)
			if err != nil || it.Pending() || it.DecidedAt.IsZero() {
				return nil // an item this build cannot render is not counted
			}
			d := day(it.DecidedAt)
			if d == nil {
				return nil
			}
			byPerson := false
			switch it.Status {
			case "approved":
				if it.Changes != nil {
					d.Edited++
				} else {
					d.Approved++
				}
				byPerson = true
			case "rejected", "denied":
				d.Denied++
				byPerson = true
			case "expired", "stale":
				d.Expired++
			}
			for _, by := range it.DecidedBy {
				if strings.HasPrefix(NameOf(by), "countersign") {
					byPerson = false
				}
			}
			if byPerson && len(it.DecidedBy) > 0 {
				tool := insightTool(it, reader)
				latency[tool] = append(latency[tool], it.DecidedAt.Sub(it.CreatedAt))
			}
			switch {
			case len(it.Votes) > 0:
				for _, v := range it.Votes {
					if v.Approve && onSurface(v.Assurance, v.Seen) {
						approved(NameOf(v.By), v.At, it.CreatedAt)
					}
				}
			case it.Status == "approved":
				for i, by := range it.DecidedBy {
					if i < len(it.DecidedVia) && it.DecidedVia[i] != "" && it.DecidedVia[i] != policy.AssuranceKey.Label() {
						approved(NameOf(by), it.DecidedAt, it.CreatedAt)
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Standing grants approve at once, with no item: the requests
		// closed in the period say how often.
		ids, more, err := approvals.ClosedSince(tx, approvals.KindActionRequest, since, insightScan)
		if err != nil {
			return err
		}
		in.Capped = in.Capped || more
		for _, id := range ids {
			r, err := approvals.LoadRequest(tx, id)
			if err != nil {
				return err
			}
			if r == nil || r.GrantID == 0 || r.Status != approvals.StatusApproved || !inScope(r.Space) {
				continue
			}
			if d := day(r.DecidedAt); d != nil {
				d.Granted++
			}
		}
		return nil
	})
	if err != nil {
		return in, err
	}
	for tool, ds := range latency {
		slices.Sort(ds)
		in.Latency = append(in.Latency, ToolLatency{Tool: tool, N: len(ds), Median: ds[(len(ds)-1)/2], P90: ds[(len(ds)*9+9)/10-1]})
	}
	slices.SortFunc(in.Latency, func(a, b ToolLatency) int { return strings.Compare(a.Tool, b.Tool) })
	for _, s := range speed {
		in.Approvers = append(in.Approvers, *s)
	}
	slices.SortFunc(in.Approvers, func(a, b ApproverSpeed) int {
		if a.Quick != b.Quick {
			return b.Quick - a.Quick
		}
		return strings.Compare(a.Name, b.Name)
	})
	return in, nil
}

// queueAges fills the queue by age from reader's queue, up to insightScan
// items.
func (x Items) queueAges(ctx context.Context, reader *Caller, in *Insights) error {
	var after uint64
	for {
		page, err := x.Queue(ctx, reader, QueueQuery{After: after, Limit: 500})
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if in.Open >= insightScan {
				in.OpenCapped = true
				return nil
			}
			age := max(in.Now.Sub(it.CreatedAt), 0)
			in.Open++
			in.Oldest = max(in.Oldest, age)
			for i := range in.Queue {
				if in.Queue[i].Below == 0 || age < in.Queue[i].Below {
					in.Queue[i].N++
					break
				}
			}
		}
		if page.Next == 0 {
			return nil
		}
		after = page.Next
	}
}

// insightTool names what a decided item was for: an action's tool (its
// call, as the card's Details say), else the kind of item; a sensitive
// item's tool only for a reader who may see its details.
func insightTool(it Item, reader *Caller) string {
	noun := map[ItemKind]string{KindMemoryChange: "memory change", KindConsent: "consent request", KindQuestion: "question"}[it.Kind]
	if it.Kind == KindAction {
		noun = "action"
		if it.Sensitive && !reader.MaySeeDetails(it) {
			return "(sensitive action)"
		}
		for _, f := range it.Details {
			if f.Label == "Tool" {
				return OneLine(f.Value, 64)
			}
		}
	}
	if noun == "" {
		noun = OneLine(string(it.Kind), 40)
	}
	return noun
}

// PendingOldest is when the oldest item still awaiting a decision was made
// (zero: none). Items are numbered in the order they are made, so it is
// the first open item that is still pending.
func (x Items) PendingOldest(ctx context.Context) (time.Time, error) {
	b := x.b
	var oldest time.Time
	err := b.store.View(ctx, func(tx kv.Tx) error {
		return tx.Ascend(bucketOpen, nil, nil, func(k, _ []byte) error {
			it, err := b.itemView(tx, kv.ParseU64(k))
			if err != nil || !it.Pending() {
				return nil
			}
			oldest = it.CreatedAt
			return kv.ErrStop
		})
	})
	return oldest, err
}
