package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// Item buckets.
const (
	bucketItems  = "items"      // item id (big-endian seq) -> ItemRecord JSON
	bucketOutbox = "outbox"     // sink 0x00 seq -> Event JSON
	bucketOpen   = "items_open" // item id -> openEntry JSON: items not yet decided (queue.go)
)

// ItemKind is the kind of a pending item shown in chat.
type ItemKind string

// The kinds of item.
const (
	KindMemoryChange ItemKind = "memory_change" // a proposal on a confirm slot
	KindAction       ItemKind = "action"        // an agent tool call awaiting confirmation
	KindConsent      ItemKind = "consent"       // a soft-approval request
	KindQuestion     ItemKind = "question"      // an ask_user question
)

// MessageRef locates one chat message posted for an item.
type MessageRef struct {
	Platform  string `json:"platform"` // slack or discord
	ChannelID string `json:"channel_id"`
	MessageID string `json:"message_id"` // Slack ts, Discord message id
}

// ItemRecord is the stored envelope of a pending item: what it points at in
// its own domain (Key), where it is shown, and the messages posted for it.
type ItemRecord struct {
	ID        uint64       `json:"id"`
	Kind      ItemKind     `json:"kind"`
	Key       string       `json:"key"` // memory id or request id, in Space
	Space     Space        `json:"space"`
	Channel   string       `json:"channel"` // the configured channel name, "default" unless a slot or tool names another
	CreatedAt time.Time    `json:"created_at"`
	Messages  []MessageRef `json:"messages,omitempty"`
	// Due is the expiry the item is queued under (queue.go); zero: none.
	Due time.Time `json:"due,omitzero"`
	// Requester is the id of the principal whose call opened the item
	// (its open items count against limits.open_items_per_requester).
	Requester string `json:"requester,omitempty"`
}

// Field is one labelled line of an item view.
type Field struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// Item is the platform-neutral view of an item that chat renders. Every
// string in it may be untrusted text: renderers escape it.
type Item struct {
	ID        uint64    `json:"id"`
	Kind      ItemKind  `json:"kind"`
	Title     string    `json:"title"` // one line: what is asked
	Space     Space     `json:"space"`
	Requester string    `json:"requester"` // "name [id]"
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Fields    []Field   `json:"fields"`
	// Status is pending until decided; then the outcome word (approved,
	// rejected, denied, expired, stale, answered, recorded).
	Status    string   `json:"status"`
	DecidedBy []string `json:"decided_by,omitempty"`
	// DecidedVia is how each of DecidedBy was authenticated for the
	// decision ("chat click", "sign-in link", "OIDC", "OIDC step-up",
	// "passkey", "API key"; "" when not recorded), in the same order;
	// nil when none was.
	DecidedVia []string     `json:"decided_via,omitempty"`
	DecidedAt  time.Time    `json:"decided_at,omitzero"`
	Reason     string       `json:"reason,omitempty"`
	Tally      string       `json:"tally,omitempty"` // "1 of 2 approvals: dr_smith"
	Sensitive  bool         `json:"sensitive,omitempty"`
	Options    []string     `json:"options,omitempty"` // choices of a question
	Multi      bool         `json:"multi,omitempty"`   // a question that takes several choices
	Channel    string       `json:"channel"`
	Messages   []MessageRef `json:"messages,omitempty"`
	// WebURL is the item's page in the web console when web.public_url is
	// set (chat cards link to it); "" otherwise.
	WebURL string `json:"web_url,omitempty"`
	// Editable, on a pending item an approver may edit before approving,
	// is what may be changed and its current version (nil: not editable).
	Editable *Editable `json:"editable,omitempty"`
	// Changes, on an item edited by an approver, is who changed it and how
	// (chat.WithChanges is its sentence); nil when unedited.
	Changes *Changes `json:"changes,omitempty"`
	// StepUp, when positive, says approving the item needs a fresh sign-in
	// at the identity provider within that long (the console's step-up);
	// chat offers a one-time link to the console instead.
	StepUp time.Duration `json:"step_up,omitempty"`
	// MinAssurance, when set, is the least assurance approving it needs
	// (tools[].step_up.method: a console surface offers the step-up that
	// reaches it, a passkey for "passkey"); the one rule checks it.
	MinAssurance policy.Assurance `json:"min_assurance,omitempty"`
	// Grants are the standing grants an approver may add to an approval
	// of this pending item (the tool's grants: config); none: approve only.
	Grants []GrantOption `json:"grants,omitempty"`
	// Version, on an action request, is the SHA-256 of the arguments up
	// for approval (the edited ones, when edited): a surface's Approve
	// carries it, and the deciding transaction refuses an approval of a
	// version another approver's edit has replaced.
	Version string `json:"version,omitempty"`
	// Revised reports an action request edited since it was created: an
	// approval of it must name its Version.
	Revised bool `json:"revised,omitempty"`
	// Batch, on a pending item a person may approve together with others,
	// names the items it may be batched with (the same tool under the
	// same rule: "order_medication, no rule"); "" when it is never
	// batched (not an action, destructive, signed off in stages, quorum
	// above 1, step-up). Each item of a batch is still decided on its
	// own, under the one rule.
	Batch string `json:"batch,omitempty"`
	// Decidable, on a pending item whose source says who decides it, is
	// the item as the one decision rule sees it now: the approvers (the
	// open stage's, when signed off in stages), the people who approved
	// an earlier stage. Hints read it (Items.ReadOnly); the decision
	// itself reads the item's state in its own transaction. nil: the
	// source says nothing more than the requester and the space.
	Decidable *policy.Decidable `json:"-"`
	// BreakGlass, when positive, says the item's requester may approve it
	// themselves as break-glass (break_glass: in config.yaml), after a
	// fresh sign-in within that long (Caller.MayOfferBreakGlass); zero:
	// not offered. The one decision rule still decides.
	BreakGlass time.Duration `json:"break_glass,omitempty"`

	// The card's lines for the person clicking (card.go), computed by the
	// item's source from the item, never taken from the agent's words:
	// Effect is what approving does while the item is pending ("ward_bot
	// runs order_medication once with these arguments…"), what happens
	// now once it is approved; Asked is why a person is asked (the rule
	// that matched); Args are an action's arguments one a line; Details
	// are what surfaces fold away (raw JSON, hashes, quorum arithmetic,
	// principal ids, the configured category, the channel); Danger marks
	// a destructive or dry-run-first item; Facts are the facts the
	// approval rests on (tools[].context) and Reopened why the request
	// went back for a new decision; Votes are the votes with what each
	// voter was shown.
	Effect   string     `json:"effect,omitempty"`
	Asked    string     `json:"asked,omitempty"`
	Args     []Field    `json:"args,omitempty"`
	Details  []Field    `json:"details,omitempty"`
	Danger   *Danger    `json:"danger,omitempty"`
	Facts    []FactView `json:"facts,omitempty"`
	Reopened string     `json:"reopened,omitempty"`
	Votes    []VoteView `json:"votes,omitempty"`
}

// Pending reports whether the item still awaits a decision.
func (it Item) Pending() bool { return it.Status == "pending" }

// ItemSource is implemented per item kind by the package that owns the
// item's state.
type ItemSource interface {
	// View renders the item's current state.
	View(tx kv.Tx, rec ItemRecord) (Item, error)
	// DecisionCall maps a decision to the tool call that makes it, as JSON
	// arguments: the older form of ItemDecider, used only for a source
	// that does not implement it (whose handler Decide then runs in a
	// transaction of its own). approve is false for a rejection; answers
	// carry a question's chosen options.
	DecisionCall(rec ItemRecord, approve bool, reason string, answers []string) (tool string, args map[string]any, err error)
}

// ItemEditor is implemented by the item sources whose items an approver
// may edit before approving (bot.Item.Editable): it maps an approval with
// changes to the tool call that makes it (approve_action with arguments,
// confirm_change with a value), so an edit from chat or the console is
// validated and decided by the same code as one over the API.
type ItemEditor interface {
	// EditCall maps an approval of rec with the edited version edit (the
	// Editable's form: a JSON object of arguments, or a JSON string value)
	// to a tool call.
	EditCall(rec ItemRecord, edit json.RawMessage, reason string) (tool string, args map[string]any, err error)
}

// SeenTaker is implemented by the item sources whose decision tools
// record what the decider was shown (a "seen" argument: approve_action and
// deny_action take one), for the kinds it reports.
type SeenTaker interface {
	TakesSeen(k ItemKind) bool
}

// Items are the things a person may decide (memory proposals, action and
// consent requests, questions), each with a small global id, as every
// surface reads them: the neutral view (Item), its stored record, the
// chat messages posted for it. Deciding one is Bot.Decide. Items is an
// accessor (as are Chat, Deliveries and WebLinks): it groups what the
// surfaces read about items, so that *Bot's own methods stay the paths
// every call takes (Call, Decide, Update, View), and a surface names the
// part of the bot it uses.
type Items struct{ b *Bot }

// Items returns the bot's items.
func (b *Bot) Items() Items { return Items{b: b} }

// RegisterKind installs the source of one kind of item. Call it while
// wiring, before the bot serves.
func (x Items) RegisterKind(k ItemKind, s ItemSource) { x.b.kinds[k] = s }

// NewItem records a new pending item in tx, files it in the queue of open
// items under its expiry (zero: it does not expire) and queues its
// "created" event for every sink. It returns the item's id. The call's
// caller is its requester: one that already keeps Options.MaxOpenItems
// items open is refused (KindRateLimited), and nothing is written.
func (tx *Tx) NewItem(kind ItemKind, key string, sp Space, channel string, expires time.Time) (uint64, error) {
	return tx.newItem(kind, key, sp, channel, expires, true)
}

// NewClosedItem records an item that has its outcome already (a consent
// the agent reports as given): it is shown in chat like any item, but
// never awaits a decision, so it is not filed among the open items.
func (tx *Tx) NewClosedItem(kind ItemKind, key string, sp Space, channel string) (uint64, error) {
	return tx.newItem(kind, key, sp, channel, time.Time{}, false)
}

func (tx *Tx) newItem(kind ItemKind, key string, sp Space, channel string, expires time.Time, open bool) (uint64, error) {
	var requester *Caller
	if tx.call != nil && tx.call.Caller != nil && tx.call.Caller.Surface != "system" {
		requester = tx.call.Caller
		if open {
			if err := checkQuota(tx.Tx, requester, tx.call.bot.maxOpen); err != nil {
				return 0, err
			}
		}
	}
	id, err := tx.NextSequence(bucketItems)
	if err != nil {
		return 0, err
	}
	if channel == "" {
		channel = "default"
	}
	sp = sp.Normalized()
	rec := ItemRecord{ID: id, Kind: kind, Key: key, Space: sp, Channel: channel, CreatedAt: tx.now(), Due: expires}
	if requester != nil {
		rec.Requester = requester.ID
	}
	if err := putItem(tx.Tx, rec); err != nil {
		return 0, err
	}
	if open {
		if err := fileOpen(tx.Tx, id, openEntry{Space: sp.UserID, Kind: kind, Due: dueNanos(expires), Requester: rec.Requester}); err != nil {
			return 0, err
		}
	}
	return id, tx.Emit(id, EventCreated, "")
}

func (tx *Tx) now() time.Time {
	if tx.call != nil {
		return tx.call.Now
	}
	return time.Now()
}

func putItem(tx kv.Tx, rec ItemRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return tx.Put(bucketItems, kv.U64(rec.ID), b)
}

// LoadItemRecord reads an item record; it returns nil if there is none.
func LoadItemRecord(tx kv.Tx, id uint64) (*ItemRecord, error) {
	b, err := tx.Get(bucketItems, kv.U64(id))
	if err != nil || b == nil {
		return nil, err
	}
	var rec ItemRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("item %d: %w", id, err)
	}
	return &rec, nil
}

// ParseItemID parses an item id as shown in chat ("12" or "#12").
func ParseItemID(s string) (uint64, error) {
	if len(s) > 0 && s[0] == '#' {
		s = s[1:]
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, Invalid("id", "%q is not an item id; item ids are positive numbers such as 12", s)
	}
	return n, nil
}

// ErrNoItem is returned for an item id that does not exist.
var ErrNoItem = errors.New("no such item")

// Get returns the current view of item id, with its message references.
func (x Items) Get(ctx context.Context, id uint64) (Item, error) {
	b := x.b
	var it Item
	err := b.store.View(ctx, func(tx kv.Tx) error {
		var err error
		it, err = b.itemView(tx, id)
		return err
	})
	return it, err
}

func (b *Bot) itemView(tx kv.Tx, id uint64) (Item, error) {
	rec, err := LoadItemRecord(tx, id)
	if err != nil {
		return Item{}, err
	}
	if rec == nil {
		return Item{}, ErrNoItem
	}
	return b.viewOf(tx, rec)
}

func (b *Bot) viewOf(tx kv.Tx, rec *ItemRecord) (Item, error) {
	id := rec.ID
	src, ok := b.kinds[rec.Kind]
	if !ok {
		return Item{}, fmt.Errorf("item %d: no source for kind %s", id, rec.Kind)
	}
	it, err := src.View(tx, *rec)
	if err != nil {
		return Item{}, err
	}
	it.ID, it.Kind, it.Space, it.Channel, it.Messages = rec.ID, rec.Kind, rec.Space, rec.Channel, rec.Messages
	it.WebURL = b.webItemURL(rec.ID)
	if it.CreatedAt.IsZero() {
		it.CreatedAt = rec.CreatedAt
	}
	lent, err := b.delegationFields(tx, rec, it) // delegations.go
	if err != nil {
		return Item{}, err
	}
	it.Fields = append(it.Fields, lent...)
	return it, nil
}

// AddMessageRef records a chat message posted for item id, so that it can be
// updated in place after a restart.
func (x Items) AddMessageRef(ctx context.Context, id uint64, ref MessageRef) error {
	b := x.b
	return b.store.Update(ctx, func(tx kv.Tx) error {
		rec, err := LoadItemRecord(tx, id)
		if err != nil {
			return err
		}
		if rec == nil {
			return ErrNoItem
		}
		for _, m := range rec.Messages {
			if m == ref {
				return nil
			}
		}
		rec.Messages = append(rec.Messages, ref)
		return putItem(tx, *rec)
	})
}

// DecideItem is Decide with a decision's common fields: approve or not,
// the reason, a question's answers. An id that is not an item is a
// KindNotFound error naming it.
func (b *Bot) DecideItem(ctx context.Context, caller *Caller, id uint64, approve bool, reason string, answers []string) (Result, error) {
	dec, err := b.Decide(ctx, caller, Decision{ItemID: id, Approve: approve, Reason: reason, Answers: answers})
	return dec.Result, noItem(id, err)
}

// EditItem approves item id for caller with the edited version edit (see
// Editable): Decide with Decision.Edit, so the item's decision tool
// (approve_action with arguments, confirm_change with a value) validates
// the edit like a new request, and the one decision rule decides.
func (b *Bot) EditItem(ctx context.Context, caller *Caller, id uint64, edit json.RawMessage, reason string) (Result, error) {
	dec, err := b.Decide(ctx, caller, Decision{ItemID: id, Approve: true, Reason: reason, Edit: edit})
	return dec.Result, noItem(id, err)
}

// noItem turns ErrNoItem into the API's not-found error naming id.
func noItem(id uint64, err error) error {
	if errors.Is(err, ErrNoItem) {
		return Errorf(KindNotFound, "No item #%d.", id)
	}
	return err
}

// Event types queued in the outbox.
const (
	EventCreated   = "created"   // post the item
	EventUpdated   = "updated"   // refresh the item's messages (a quorum tally moved)
	EventDecided   = "decided"   // the item reached its outcome: update messages in place
	EventReminder  = "reminder"  // post a reminder in the item's thread
	EventEscalated = "escalated" // post an escalation in the item's thread
	// EventNote posts Note in the item's thread whatever the item's state
	// (a call approved under a standing grant made on this item).
	EventNote = "note"
	// EventPost posts the item's card in the configured channel Note
	// names, beside its other cards, unless it has a card there already
	// (a stage that opened: tools[].stages[].channels).
	EventPost = "post"
	// EventDirect posts the item's card in a direct conversation with the
	// configured person Note names (a principal's name), on each surface
	// where they have an account, unless it has a card there already (a
	// stage that opened: tools[].stages[].notify).
	EventDirect = "direct"
)

// Event is one outbox entry for one sink.
type Event struct {
	Seq    uint64    `json:"seq"`
	Sink   string    `json:"sink"`
	Type   string    `json:"type"`
	ItemID uint64    `json:"item_id"`
	Note   string    `json:"note,omitempty"` // escalation target, reminder text
	At     time.Time `json:"at"`
	// Attempts, Faults and NextAttempt are the delivery state kept by the
	// sink's worker (Drain): the failed attempts, those of them that were
	// the event's own fault (GiveUpAfter), and when to try again.
	Attempts    int       `json:"attempts,omitempty"`
	Faults      int       `json:"faults,omitempty"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	// Trace is the W3C traceparent of the call that queued the event, when
	// tracing is on: the delivery's span links to it (trace.go).
	Trace string `json:"trace,omitempty"`
}

// Emit queues an event about item id for every configured sink, in tx.
// EventDecided also takes the item off the open items and their queue.
func (tx *Tx) Emit(id uint64, typ, note string) error {
	if typ == EventDecided {
		tx.decided, tx.decidedItem = true, id
		if err := unfileOpen(tx.Tx, id); err != nil {
			return err
		}
	}
	for _, sink := range tx.call.bot.sinks {
		if err := tx.EmitTo(sink, id, typ, note); err != nil {
			return err
		}
	}
	return nil
}

// ReopenItem puts item id back on the open items, in tx, filed in the
// queue under its new expiry (queue.go): its request went back for a new
// decision (approvals.Request.Reopen). It queues the item's "updated"
// event for every sink, so every card shows it pending again, and, when
// note is not "", the note in the cards' threads, so the people who
// decided it hear why. It does not count against the requester's quota
// (the item was theirs already).
func (tx *Tx) ReopenItem(id uint64, expires time.Time, note string) error {
	rec, err := LoadItemRecord(tx.Tx, id)
	if err != nil {
		return err
	}
	if rec == nil {
		return fmt.Errorf("item %d: no such item to reopen", id)
	}
	if err := unfileOpen(tx.Tx, id); err != nil { // an older entry, if any
		return err
	}
	rec.Due = expires
	if err := putItem(tx.Tx, *rec); err != nil {
		return err
	}
	if err := fileOpen(tx.Tx, id, openEntry{Space: rec.Space.UserID, Kind: rec.Kind, Due: dueNanos(expires), Requester: rec.Requester}); err != nil {
		return err
	}
	if err := tx.Emit(id, EventUpdated, ""); err != nil {
		return err
	}
	if note == "" {
		return nil
	}
	return tx.Emit(id, EventNote, note)
}

// EmitTo queues an event for one sink, in tx.
func (tx *Tx) EmitTo(sink string, id uint64, typ, note string) error {
	seq, err := tx.NextSequence(bucketOutbox)
	if err != nil {
		return err
	}
	ev := Event{Seq: seq, Sink: sink, Type: typ, ItemID: id, Note: note, At: tx.now(), Trace: tx.trace}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	tx.queued, tx.item = true, id
	return tx.Put(bucketOutbox, outboxKey(sink, seq), b)
}

func outboxKey(sink string, seq uint64) []byte {
	return kv.Join([]byte(sink), kv.U64(seq))
}

// EscalationNote is the Note of an EventEscalated: where the escalation goes,
// as "channel=<name> role=<role>" (either part may be absent).
func EscalationNote(channel, role string) string {
	var parts []string
	if channel != "" {
		parts = append(parts, "channel="+channel)
	}
	if role != "" {
		parts = append(parts, "role="+role)
	}
	return strings.Join(parts, " ")
}

// parseEscalation reads an escalation note written by EscalationNote; words
// that are neither part come back in rest.
func parseEscalation(note string) (channel, role string, rest []string) {
	for _, w := range strings.Fields(note) {
		k, v, ok := strings.Cut(w, "=")
		switch {
		case ok && k == "channel" && channel == "":
			channel = v
		case ok && k == "role" && role == "":
			role = v
		default:
			rest = append(rest, w)
		}
	}
	return channel, role, rest
}

// OfRequest returns the item of an action, consent or question request:
// its id, or 0 when it has none (decided at once, or no such request).
func (x Items) OfRequest(ctx context.Context, requestID string) (uint64, error) {
	b := x.b
	var id uint64
	err := b.View(ctx, func(tx kv.Tx) error {
		req, err := approvals.LoadRequest(tx, requestID)
		if err != nil || req == nil {
			return err
		}
		id = req.ItemID
		return nil
	})
	return id, err
}
