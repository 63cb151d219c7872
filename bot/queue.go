package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// This file is the queue of open items: every item not yet decided, kept
// in an index the store reads in the order people should decide them
// (soonest to expire first), under keys that let a reader ask the store
// for exactly the items it may see. Nothing is read and then filtered by
// scope, space or kind, so that no number of one agent's items can push
// another's out of a page: each page holds only what the reader may see,
// and a cursor reaches the rest.
//
// Each open item has one entry under each view it belongs to:
//
//	"a"  0x00                       every item
//	"s"  0x00 space 0x00            one memory space (its user_id)
//	"k"  0x00 kind 0x00             one kind
//	"sk" 0x00 space 0x00 kind 0x00  one space and one kind
//
// followed by its position: U64(expiry, unix ns; an item that never
// expires sorts last) ++ U64(item id). A reader whose scopes name some
// spaces reads their "s" (or "sk") views and merges them; an unscoped
// reader reads "a" (or "k"). items_requester counts each principal's open
// items for the quota (Options.MaxOpenItems).
//
// The entries are written with the item (NewItem) and removed when it
// leaves the open items (its decided event, DropItem), in the same
// transaction, from the item's items_open value (openEntry), so that they
// never disagree with the items. Items opened before the queue existed
// are filed once, by the first read or write that finds them
// (ensureQueue).

// Queue buckets.
const (
	bucketQueue     = "items_queue"     // view ++ position -> nothing
	bucketRequester = "items_requester" // requester id 0x00 U64(item id) -> nothing
)

// queueBuilt, in bucketQueue, marks that every open item is filed. No
// view's prefix starts with 0xff, so no scan reaches it.
var queueBuilt = []byte("\xffbuilt")

// defaultMaxOpenItems is how many items one principal may keep awaiting a
// decision when Options.MaxOpenItems is 0 (limits.open_items_per_requester).
const defaultMaxOpenItems = 100

// openEntry is the value of an item's items_open entry: what its queue
// entries are keyed by.
type openEntry struct {
	Space     string   `json:"s"`
	Kind      ItemKind `json:"k"`
	Due       int64    `json:"d,omitempty"` // the expiry, unix ns; 0: none
	Requester string   `json:"r,omitempty"` // the principal that asked; "": none
}

func (e openEntry) position(id uint64) []byte {
	d := uint64(math.MaxUint64)
	if e.Due > 0 {
		d = uint64(e.Due)
	}
	return append(kv.U64(d), kv.U64(id)...)
}

// views are the prefixes of the views an item belongs to.
func (e openEntry) views() [][]byte {
	return [][]byte{viewPrefix("", ""), viewPrefix(e.Space, ""), viewPrefix("", e.Kind), viewPrefix(e.Space, e.Kind)}
}

// viewPrefix is the prefix of the view of one space and one kind ("":
// every space, every kind).
func viewPrefix(space string, kind ItemKind) []byte {
	switch {
	case space != "" && kind != "":
		return kv.Join([]byte("sk"), []byte(space), []byte(kind), nil)
	case space != "":
		return kv.Join([]byte("s"), []byte(space), nil)
	case kind != "":
		return kv.Join([]byte("k"), []byte(kind), nil)
	}
	return kv.Join([]byte("a"), nil)
}

func requesterKey(requester string, id uint64) []byte {
	return kv.Join([]byte(requester), kv.U64(id))
}

func dueNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixNano(), 1)
}

// fileOpen files item id as open: its items_open entry, its queue
// entries and its requester's count.
func fileOpen(tx kv.Tx, id uint64, e openEntry) error {
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := tx.Put(bucketOpen, kv.U64(id), v); err != nil {
		return err
	}
	pos := e.position(id)
	for _, p := range e.views() {
		if err := tx.Put(bucketQueue, append(p, pos...), nil); err != nil {
			return err
		}
	}
	if e.Requester != "" {
		return tx.Put(bucketRequester, requesterKey(e.Requester, id), nil)
	}
	return nil
}

// unfileOpen takes item id off the open items, with its queue entries and
// its requester's count. An item that is not open is left as it is.
func unfileOpen(tx kv.Tx, id uint64) error {
	v, err := tx.Get(bucketOpen, kv.U64(id))
	if err != nil || v == nil {
		return err
	}
	e, ok := parseOpen(v)
	if !ok {
		// Opened before the queue existed and not yet filed: it has no
		// queue entries to remove.
		return tx.Delete(bucketOpen, kv.U64(id))
	}
	pos := e.position(id)
	for _, p := range e.views() {
		if err := tx.Delete(bucketQueue, append(p, pos...)); err != nil {
			return err
		}
	}
	if e.Requester != "" {
		if err := tx.Delete(bucketRequester, requesterKey(e.Requester, id)); err != nil {
			return err
		}
	}
	return tx.Delete(bucketOpen, kv.U64(id))
}

// parseOpen reads an items_open value; ok is false for the one-byte value
// written before the queue existed.
func parseOpen(v []byte) (openEntry, bool) {
	var e openEntry
	if len(v) < 2 || json.Unmarshal(v, &e) != nil || e.Kind == "" {
		return openEntry{}, false
	}
	return e, true
}

// openCount counts requester's open items, up to limit.
func openCount(tx kv.Tx, requester string, limit int) (int, error) {
	n := 0
	err := kv.Prefix(tx, bucketRequester, kv.Join([]byte(requester), nil), func(_, _ []byte) error {
		n++
		if n >= limit {
			return kv.ErrStop
		}
		return nil
	})
	return n, err
}

// checkQuota refuses a new item of requester's when it already keeps max
// open (429): one principal cannot crowd every approver's view with
// requests that then time out.
func checkQuota(tx kv.Tx, c *Caller, max int) error {
	if max <= 0 || c == nil || c.ID == "" {
		return nil
	}
	n, err := openCount(tx, c.ID, max)
	if err != nil {
		return err
	}
	if n < max {
		return nil
	}
	e := Errorf(KindRateLimited, "%s already has %d items awaiting a decision, the most one principal may keep open (limits.open_items_per_requester), so nothing more was asked of a person. Wait until some of them are decided or expire (poll action_status with wait_seconds), then ask again.", c.Name, max)
	e.RetryAfter = 60
	return e
}

// ensureQueue files the items opened before the queue existed, once per
// store (the first call that finds the queue unbuilt does it; later calls
// cost one flag read).
func (b *Bot) ensureQueue(ctx context.Context) error {
	if b.queueBuilt.Load() {
		return nil
	}
	for {
		var done bool
		err := b.store.Update(ctx, func(tx kv.Tx) error {
			var err error
			done, err = b.fileLegacy(tx, 512)
			return err
		})
		if err != nil {
			return err
		}
		if done {
			b.queueBuilt.Store(true)
			return nil
		}
	}
}

// fileLegacy files up to limit items opened before the queue existed and
// reports whether none is left (then it marks the queue built).
func (b *Bot) fileLegacy(tx kv.Tx, limit int) (bool, error) {
	if v, err := tx.Get(bucketQueue, queueBuilt); err != nil || v != nil {
		return v != nil, err
	}
	var legacy []uint64
	err := tx.Ascend(bucketOpen, nil, nil, func(k, v []byte) error {
		if _, ok := parseOpen(v); !ok {
			legacy = append(legacy, kv.ParseU64(k))
		}
		if len(legacy) >= limit {
			return kv.ErrStop
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	for _, id := range legacy {
		rec, err := LoadItemRecord(tx, id)
		if err != nil {
			return false, err
		}
		if rec == nil {
			if err := tx.Delete(bucketOpen, kv.U64(id)); err != nil {
				return false, err
			}
			continue
		}
		e := openEntry{Space: rec.Space.Normalized().UserID, Kind: rec.Kind}
		if it, err := b.viewOf(tx, rec); err == nil {
			rec.Due = it.ExpiresAt
			_, rec.Requester = splitDisplay(it.Requester)
		}
		e.Due, e.Requester = dueNanos(rec.Due), rec.Requester
		if err := putItem(tx, *rec); err != nil {
			return false, err
		}
		if err := fileOpen(tx, id, e); err != nil {
			return false, err
		}
	}
	if len(legacy) >= limit {
		return false, nil
	}
	return true, tx.Put(bucketQueue, queueBuilt, []byte{1})
}

// QueueQuery says which open items a reader wants.
type QueueQuery struct {
	// Space is one memory space's user_id; "" is every space the reader
	// may see. A space outside the reader's scopes lists nothing.
	Space string
	// Kind is one kind of item; "" is every kind.
	Kind ItemKind
	// Channel is one channel; "" is every channel. It is matched as the
	// items are read, so a page may hold fewer than Limit items and still
	// have a Next.
	Channel string
	// After is the Next of the previous page; 0 starts at the item that
	// expires soonest.
	After uint64
	// Limit is how many items a page holds at most (1 to 500).
	Limit int
}

// QueuePage is one page of open items.
type QueuePage struct {
	Items []Item
	// Records are the items' records, Records[i] that of Items[i] (its
	// Key names the request or memory id behind the item).
	Records []ItemRecord
	// Next is the After of the next page; 0 when nothing follows.
	Next uint64
}

// queueScan bounds the entries one page reads: with a channel filter that
// matches little, the page ends there and Next goes on.
const queueScan = 2000

// Queue returns one page of the open items reader may see, soonest to
// expire first (items that never expire last, in the order they were
// made): only with the read capability, only in the spaces of its scopes,
// read from the store already filtered by scope, space and kind. Follow
// Next to read every one.
func (x Items) Queue(ctx context.Context, reader *Caller, q QueueQuery) (QueuePage, error) {
	if !reader.MayRead() {
		return QueuePage{}, nil
	}
	return x.queue(ctx, readerSpaces(reader), q)
}

// readerSpaces are the spaces reader may see: nil for every space.
func readerSpaces(reader *Caller) []string {
	if policy.Unscoped(reader.Role, reader.Scopes) {
		return nil
	}
	sp := slices.Clone(reader.Scopes)
	slices.Sort(sp)
	return slices.Compact(sp)
}

// Pending returns up to limit items still awaiting a decision, in every
// space, soonest to expire first, in one read transaction.
func (x Items) Pending(ctx context.Context, limit int) ([]Item, error) {
	p, err := x.queue(ctx, nil, QueueQuery{Limit: limit})
	return p.Items, err
}

// prefixes are the views a query reads: one, or one per space in scope.
func (q QueueQuery) prefixes(spaces []string) [][]byte {
	switch {
	case spaces == nil:
		return [][]byte{viewPrefix(q.Space, q.Kind)}
	case q.Space != "":
		if !slices.Contains(spaces, q.Space) {
			return nil
		}
		return [][]byte{viewPrefix(q.Space, q.Kind)}
	}
	out := make([][]byte, 0, len(spaces))
	for _, s := range spaces {
		out = append(out, viewPrefix(s, q.Kind))
	}
	return out
}

func (x Items) queue(ctx context.Context, spaces []string, q QueueQuery) (QueuePage, error) {
	if q.Limit <= 0 || q.Limit > 500 {
		return QueuePage{}, Invalid("limit", "must be 1 to 500")
	}
	b := x.b
	if err := b.ensureQueue(ctx); err != nil {
		return QueuePage{}, err
	}
	prefixes := q.prefixes(spaces)
	var page QueuePage
	err := b.store.View(ctx, func(tx kv.Tx) error {
		page = QueuePage{}
		var pos []byte
		if q.After != 0 {
			var err error
			if pos, err = b.positionOf(tx, q.After); err != nil {
				return err
			}
		}
		return b.readQueue(tx, prefixes, pos, q, &page)
	})
	return page, err
}

// readQueue fills page from the views prefixes, merged, after position
// pos (nil: from the start).
func (b *Bot) readQueue(tx kv.Tx, prefixes [][]byte, pos []byte, q QueueQuery, page *QueuePage) error {
	batch := min(q.Limit+1, 256)
	for scanned := 0; scanned < queueScan; {
		// The next batch of each view; their merge is in order up to
		// the first last-key of a view that had more (bound).
		var cand [][]byte
		var bound []byte
		for _, p := range prefixes {
			from := append(slices.Clone(p), pos...)
			if pos != nil {
				from = append(from, 0) // strictly after pos
			}
			n := 0
			err := tx.Ascend(bucketQueue, from, kv.PrefixEnd(p), func(k, _ []byte) error {
				if len(k) != len(p)+16 {
					return nil
				}
				cand = append(cand, bytes.Clone(k[len(p):]))
				if n++; n >= batch {
					if bound == nil || bytes.Compare(k[len(p):], bound) < 0 {
						bound = bytes.Clone(k[len(p):])
					}
					return kv.ErrStop
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		slices.SortFunc(cand, bytes.Compare)
		for _, c := range cand {
			if bound != nil && bytes.Compare(c, bound) > 0 {
				break
			}
			id := kv.ParseU64(c[8:])
			if len(page.Items) == q.Limit {
				page.Next = page.Items[len(page.Items)-1].ID
				return nil
			}
			pos = c
			scanned++
			rec, err := LoadItemRecord(tx, id)
			if err != nil {
				return err
			}
			if rec == nil || (q.Channel != "" && rec.Channel != q.Channel) {
				continue
			}
			it, err := b.viewOf(tx, rec)
			if err != nil {
				b.log.Warn("queue: an open item cannot be shown", "item", id, "err", err)
				continue
			}
			if it.Pending() {
				page.Items = append(page.Items, it)
				page.Records = append(page.Records, *rec)
			}
		}
		if bound == nil {
			return nil // every view read to its end
		}
	}
	if pos != nil {
		page.Next = kv.ParseU64(pos[8:])
	}
	return nil
}

// positionOf is item id's position in the queue, for a cursor.
func (b *Bot) positionOf(tx kv.Tx, id uint64) ([]byte, error) {
	rec, err := LoadItemRecord(tx, id)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, Invalid("after", "there is no item #%d to continue after: start again from the first page", id)
	}
	due := rec.Due
	if due.IsZero() {
		if it, err := b.viewOf(tx, rec); err == nil {
			due = it.ExpiresAt
		}
	}
	return openEntry{Due: dueNanos(due)}.position(id), nil
}

// QueueFacets is what a reader's filters offer: how many open items of
// each kind it may see (up to facetCap each), and the spaces it may
// filter on.
type QueueFacets struct {
	Kinds map[ItemKind]int
	// Capped names the kinds whose count reached facetCap ("1000+").
	Capped map[ItemKind]bool
	// Spaces are the spaces the reader may filter on: its scopes, or for
	// an unscoped reader the spaces that have open items (up to
	// facetSpaces of them).
	Spaces []string
}

// Bounds of QueueFacets.
const (
	facetCap    = 1000
	facetSpaces = 200
)

// Facets counts the open items reader may see by kind (in space, when
// given) and lists the spaces it may filter on. It reads queue keys only.
func (x Items) Facets(ctx context.Context, reader *Caller, space string) (QueueFacets, error) {
	f := QueueFacets{Kinds: map[ItemKind]int{}, Capped: map[ItemKind]bool{}}
	if !reader.MayRead() {
		return f, nil
	}
	b := x.b
	if err := b.ensureQueue(ctx); err != nil {
		return f, err
	}
	spaces := readerSpaces(reader)
	kinds := make([]ItemKind, 0, len(b.kinds))
	for k := range b.kinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	err := b.store.View(ctx, func(tx kv.Tx) error {
		f.Kinds, f.Capped, f.Spaces = map[ItemKind]int{}, map[ItemKind]bool{}, nil
		for _, k := range kinds {
			for _, p := range (QueueQuery{Space: space, Kind: k}).prefixes(spaces) {
				room := facetCap - f.Kinds[k]
				if room <= 0 {
					break
				}
				n := 0
				err := kv.Prefix(tx, bucketQueue, p, func(_, _ []byte) error {
					if n++; n >= room {
						return kv.ErrStop
					}
					return nil
				})
				if err != nil {
					return err
				}
				f.Kinds[k] += n
			}
			f.Capped[k] = f.Kinds[k] >= facetCap
		}
		if spaces != nil {
			f.Spaces = spaces
			return nil
		}
		return distinctSpaces(tx, &f.Spaces)
	})
	return f, err
}

// distinctSpaces lists the spaces with open items, up to facetSpaces,
// skipping from one space's view to the next.
func distinctSpaces(tx kv.Tx, out *[]string) error {
	base := []byte("s\x00")
	from := base
	for len(*out) < facetSpaces {
		var next string
		found := false
		err := tx.Ascend(bucketQueue, from, kv.PrefixEnd(base), func(k, _ []byte) error {
			rest := k[len(base):]
			if i := bytes.IndexByte(rest, 0); i > 0 {
				next, found = string(rest[:i]), true
			}
			return kv.ErrStop
		})
		if err != nil {
			return err
		}
		if !found {
			return nil
		}
		*out = append(*out, next)
		from = kv.PrefixEnd(viewPrefix(next, ""))
	}
	return nil
}
