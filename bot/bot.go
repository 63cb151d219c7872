// Package bot is the application: the one registry of tools every surface
// serves, identity and authorisation of each call, the audit entry and the
// outbox written in the same transaction as the state change, the pending
// items that chat shows, and the sweeper.
package bot

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
	"go.opentelemetry.io/otel/trace"
)

// Options are the dependencies of a Bot. Store and SigningKey are required.
type Options struct {
	Store      kv.Store
	SigningKey ed25519.PrivateKey
	Logger     *slog.Logger     // nil discards
	Now        func() time.Time // nil means time.Now
	// Sinks are the outbox consumers (for example "slack", "discord"):
	// every item event is queued once for each.
	Sinks []string
	// CachePrincipals keeps authenticated keys in memory, so that a call
	// does not read its principal from the store. Any change of a principal
	// committed through this bot (SavePrincipal: a revocation) drops the
	// whole cache before the call that made it returns. Turn it on only
	// when this process is the only writer of the principals (bbolt: the
	// file's lock guarantees it); several replicas on one database would
	// not see each other's revocations.
	CachePrincipals bool
	// DeliveryTTL is how long chat delivery ids are remembered to drop
	// retried deliveries (retention.deliveries); 0 means
	// DefaultDeliveryTTL.
	DeliveryTTL time.Duration
	// MaxOpenItems is how many items one principal may keep awaiting a
	// decision (limits.open_items_per_requester): a call that would open
	// one more is refused (429). 0 means defaultMaxOpenItems; negative,
	// no limit.
	MaxOpenItems int
	// Tracing, when set, makes the core's spans (trace.go): a tool call, a
	// chat decision, an outbox delivery. nil makes none.
	Tracing trace.TracerProvider
	// Groups are the configured approver groups (groups: in config.yaml).
	// Every call's caller belongs to those that list it by name, besides
	// the groups its identity provider asserts (Caller.Groups): resolved
	// on each call, so the one decision rule sees membership as it is
	// when the decision is made.
	Groups policy.Groups
	// OnCall are the on-call rotations (oncall: in config.yaml), by name:
	// each works as a group whose member is whoever is on call at the
	// time of the call.
	OnCall map[string]policy.Rotation
}

// Bot is the application core. Build it with New, then Register tools.
type Bot struct {
	store  kv.Store
	key    ed25519.PrivateKey
	log    *slog.Logger
	now    func() time.Time
	sinks  []string
	tools  map[string]*Tool
	kinds  map[ItemKind]ItemSource
	outbox *Outbox

	closing     chan struct{} // closed by BeginShutdown
	closingOnce sync.Once

	sweepSteps   []namedStep
	deliveryTTL  time.Duration
	directory    *Directory
	observer     Observer                   // told about every finished call (observe.go)
	readAudit    atomic.Pointer[ReadAudit]  // the running queue of read audits, if any (auditq.go)
	limiter      *RateLimiter               // one token per tool call, per principal (ratelimit.go); nil: none
	web          webConsole                 // the web console's links (web.go); zero: no console
	authCache    *authCache                 // Options.CachePrincipals; nil: off
	authGen      atomic.Uint64              // bumped after every committed principal change
	queueBuilt   atomic.Bool                // every open item is filed in the queue (queue.go)
	maxOpen      int                        // Options.MaxOpenItems, resolved; 0: no limit
	tracer       trace.Tracer               // Options.Tracing's; nil: no spans (trace.go)
	suspendHooks []SuspendHook              // told about every new suspension (people.go)
	groups       policy.Groups              // Options.Groups
	onCall       map[string]policy.Rotation // Options.OnCall
}

// New returns a Bot with no tools registered.
func New(o Options) (*Bot, error) {
	if o.Store == nil {
		return nil, errors.New("bot: no store")
	}
	if len(o.SigningKey) != ed25519.PrivateKeySize {
		return nil, errors.New("bot: no audit signing key")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	b := &Bot{
		store: o.Store, key: o.SigningKey, log: o.Logger, now: o.Now,
		sinks: o.Sinks, tools: map[string]*Tool{}, kinds: map[ItemKind]ItemSource{},
		closing: make(chan struct{}), groups: o.Groups, onCall: o.OnCall,
	}
	b.outbox = &Outbox{b: b, wake: make(chan struct{})}
	if o.CachePrincipals {
		b.authCache = newAuthCache(&b.authGen)
	}
	if o.Tracing != nil {
		b.tracer = o.Tracing.Tracer(tracerName)
	}
	b.deliveryTTL = o.DeliveryTTL
	if b.deliveryTTL <= 0 {
		b.deliveryTTL = DefaultDeliveryTTL
	}
	switch {
	case o.MaxOpenItems == 0:
		b.maxOpen = defaultMaxOpenItems
	case o.MaxOpenItems > 0:
		b.maxOpen = o.MaxOpenItems
	}
	b.OnSweep("deliveries", b.pruneDeliveries)
	b.OnSweep("delegations", b.expireDelegations) // delegations.go
	return b, nil
}

// SequentialBuckets are the buckets of the bot and the audit chain whose
// new keys sort after every key already there (sequence numbers: items, the
// outbox by sink, the audit chain), for a store that fills such pages
// fuller (bolt.Options.Sequential).
func SequentialBuckets() []string {
	return append([]string{bucketItems, bucketOutbox}, approvals.SequentialBuckets()...)
}

// AuditedBuckets are the buckets of the bot and of approvals written only
// in the same transaction as an audit entry (principals and their keys,
// chat items, action requests): content in them next to an empty audit
// chain means the chain was emptied (approvals.Emptied).
func AuditedBuckets() []string {
	return append([]string{bucketPrincipals, bucketKeys, bucketItems}, approvals.AuditedBuckets()...)
}

// OutboxBucket is the bucket outbox events are queued in: a replica that
// hears of a committed write there wakes the outbox workers (Wake).
const OutboxBucket = bucketOutbox

// Now returns the bot's clock reading.
func (b *Bot) Now() time.Time { return b.now() }

// Store returns the store the bot writes through.
func (b *Bot) Store() kv.Store { return b.store }

// Logger returns the bot's logger.
func (b *Bot) Logger() *slog.Logger { return b.log }

// PublicKey returns the audit chain's verification key.
func (b *Bot) PublicKey() ed25519.PublicKey { return b.key.Public().(ed25519.PublicKey) }

// Call is one tool invocation in progress.
type Call struct {
	bot    *Bot
	Tool   *Tool
	Caller *Caller
	Space  Space // normalised; zero for tools without a space
	Now    time.Time
	// decided is set when one of the call's committed transactions
	// emitted an item's decided event: the call took a new decision (a
	// retry answered with the recorded outcome takes none).
	decided bool
	// item is the item a committed transaction of the call queued an
	// event about (created, decided): its span names it.
	item uint64
	// tx, while set, is the transaction the call runs in (Decide's): the
	// call's Updates and Views run in it instead of a transaction each;
	// failed is the first error one of them returned, and deferred the
	// work to do once it commits (AfterCommit).
	tx       *Tx
	failed   error
	deferred []func()
	// decidedItem is the item the call decided (its decided event), with
	// or without sinks to tell: the metrics time the decision by it.
	decidedItem uint64
}

// Bot returns the bot the call runs on.
func (c *Call) Bot() *Bot { return c.bot }

// Tx is a transaction of one call: the store's transaction plus the call's
// audit trail and outbox, which commit with it.
type Tx struct {
	kv.Tx
	call        *Call
	queued      bool
	decided     bool   // an item's decided event was emitted in this run
	principals  bool   // a principal changed (SavePrincipal)
	item        uint64 // the item of the last event emitted in this run
	decidedItem uint64 // the item decided in this run
	trace       string // the traceparent of the call's span, kept with the events it queues
}

// Call runs tool name for caller with the raw JSON arguments. It is the one
// code path of every surface. Denials are audited.
func (b *Bot) Call(ctx context.Context, caller *Caller, name string, raw []byte) (res Result, err error) {
	start := time.Now()
	var c *Call
	var span Span // the zero Span while tracing is off
	defer func() {
		b.observe(ctx, caller, name, start, c, err)
		endCall(span, c, err)
	}()
	t, ok := b.tools[name]
	if !ok {
		return Result{}, Errorf(KindNotFound, "unknown tool '%s'. GET /v1/tools lists the tools.", name)
	}
	if b.tracer != nil {
		ctx, span = b.startCall(ctx, caller, name)
	}
	if caller == nil {
		return Result{}, Errorf(KindUnauthenticated, "Access denied: authentication required. Provide a valid API key (Authorization: Bearer %s…).", KeyPrefix)
	}
	// One token per tool call, whatever the surface: a batch, a chat
	// command or a CLI call pays like an HTTP request (ratelimit.go).
	if err := b.pay(ctx, caller); err != nil {
		return Result{}, err
	}
	caller = b.withGroups(caller)
	c = &Call{bot: b, Tool: t, Caller: caller, Now: b.now()}
	if !policy.Grants(caller.Role, t.Capability) {
		// The denial is audited under the space the call named (when its
		// arguments say one), so that the space's audit log shows it.
		c.Space = t.namedSpace(raw)
		msg := policy.DenyCapability(name, t.Capability, caller.Role)
		return Result{}, b.deny(ctx, c, &policy.Refusal{Check: policy.CheckCapability, Message: msg})
	}
	args, err := t.args.decode(raw)
	if err != nil {
		return Result{}, err
	}
	return b.run(ctx, c, args)
}

// run is the rest of a call once its arguments are decoded and checked:
// the scope of their space, then the handler.
func (b *Bot) run(ctx context.Context, c *Call, args any) (Result, error) {
	t, caller, name := c.Tool, c.Caller, c.Tool.Name
	if t.spaced {
		sp := spaceIn(args, t.spaceAt)
		c.Space = sp
		if err := ValidateSpace(sp); err != nil {
			return Result{}, err
		}
		if !policy.InScope(caller.Role, caller.Scopes, sp.UserID) {
			return Result{}, b.deny(ctx, c, &policy.Refusal{Check: policy.CheckScope, Message: policy.DenyScope(name)})
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if t.Capability == policy.CapVerify {
		// The audit tools read the trail: let them see every read answer
		// given before this call, even those still queued (auditq.go).
		if err := b.FlushAudit(ctx); err != nil {
			return Result{}, err
		}
	}
	return t.Handler(ctx, c, args)
}

// namedSpace is the memory space a call's raw arguments name, or the zero
// Space when the tool has none or the arguments do not decode to a valid
// one. It decides nothing: it only labels an audit entry.
func (t *Tool) namedSpace(raw []byte) Space {
	if !t.spaced {
		return Space{}
	}
	args, err := t.args.decode(raw)
	if err != nil {
		return Space{}
	}
	sp := spaceIn(args, t.spaceAt)
	if ValidateSpace(sp) != nil {
		return Space{}
	}
	return sp
}

// ValidateSpace checks the memory-space identifiers as a tool's arguments
// give them (a missing user is the default): at most 128 bytes each, no
// control characters (Space.Check). The error is a KindInvalid *Error
// naming the part at fault.
func ValidateSpace(s Space) error {
	var se *policy.SpaceError
	if err := s.Normalized().Check(); errors.As(err, &se) {
		return Invalid(se.Field, "%s", se.Problem)
	} else if err != nil {
		return Invalid("space", "%v", err)
	}
	return nil
}

// deny records an access denial in the audit chain and returns it as a
// KindDenied error carrying r (errors.Is(err, policy.CheckStepUp)).
func (b *Bot) deny(ctx context.Context, c *Call, r *policy.Refusal) error {
	err := b.Update(ctx, c, func(tx *Tx) error {
		return tx.Audit("access_denied", c.Tool.Name+": "+r.Message)
	})
	if err != nil {
		return err
	}
	return Refused(r)
}

// Deny records a denial found by a tool handler that is not the decision
// rule's (for example a trusted source claimed by the wrong key) and
// returns it as a KindDenied error.
func (c *Call) Deny(ctx context.Context, msg string) error {
	err := c.bot.Update(ctx, c, func(tx *Tx) error {
		return tx.Audit("access_denied", c.Tool.Name+": "+msg)
	})
	if err != nil {
		return err
	}
	return &Error{Kind: KindDenied, Msg: msg}
}

// Refuse records the decision rule's refusal r in tx, with the rest of
// the transaction (its audit entry, as Call.Refuse writes it); the handler
// then returns Refused(r). A decision that runs inside another
// transaction (Decide) must refuse this way: its transaction commits the
// refusal with the delivery's dedupe.
func (tx *Tx) Refuse(r *policy.Refusal) error {
	return tx.Audit("access_denied", tx.call.Tool.Name+": "+r.Message)
}

// Refused is the KindDenied error of the decision rule's refusal r, as
// Call.Refuse returns it, for a refusal already recorded (Tx.Refuse).
func Refused(r *policy.Refusal) error { return &Error{Kind: KindDenied, Msg: r.Message, Err: r} }

// Refuse records the decision rule's refusal r (policy.Decide) and returns
// it as a KindDenied error that carries it: a surface tells a step-up
// refusal by errors.Is(err, policy.CheckStepUp), never by its text.
func (c *Call) Refuse(ctx context.Context, r *policy.Refusal) error { return c.bot.deny(ctx, c, r) }

// Update runs fn in one durable transaction on behalf of call c (in c's
// transaction, when the call runs inside one: Decide).
func (b *Bot) Update(ctx context.Context, c *Call, fn func(*Tx) error) error {
	if c != nil && c.tx != nil {
		err := fn(c.tx)
		if err != nil && c.failed == nil {
			c.failed = err
		}
		return err
	}
	var queued, decided, principals bool
	var item, decidedItem uint64
	var tp string
	if b.tracer != nil {
		tp = traceparent(ctx)
	}
	err := b.store.Update(ctx, func(t kv.Tx) error {
		tx := &Tx{Tx: t, call: c, trace: tp}
		if err := tx.suspended(); err != nil {
			return err
		}
		if err := tx.directoryGroups(); err != nil { // people.go
			return err
		}
		if err := tx.delegated(); err != nil { // delegations.go
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		queued, decided, principals, item, decidedItem = tx.queued, tx.decided, tx.principals, tx.item, tx.decidedItem // the run that commits
		return nil
	})
	if principals {
		// Even when err says the commit failed: dropping the cache is
		// always safe, and a commit may have landed before an error.
		b.authGen.Add(1)
	}
	if err == nil && queued {
		b.outbox.Wake()
	}
	if err == nil && decided && c != nil {
		c.decided, c.decidedItem = true, decidedItem
	}
	if err == nil && item != 0 && c != nil {
		c.item = item
	}
	return err
}

// View runs fn in a read-only transaction.
func (b *Bot) View(ctx context.Context, fn func(kv.Tx) error) error { return b.store.View(ctx, fn) }

// Update runs fn in one durable transaction for this call.
func (c *Call) Update(ctx context.Context, fn func(*Tx) error) error { return c.bot.Update(ctx, c, fn) }

// View runs fn in a read-only transaction (in c's transaction, when the
// call runs inside one).
func (c *Call) View(ctx context.Context, fn func(kv.Tx) error) error {
	if c.tx != nil {
		return fn(c.tx.Tx)
	}
	return c.bot.store.View(ctx, fn)
}

// Audit appends an entry for this call's caller and space to the chain.
func (tx *Tx) Audit(action, detail string) error {
	_, err := tx.AuditAs(tx.call.Caller.String(), tx.call.Space, action, detail)
	return err
}

// AuditAs appends an entry with an explicit principal and space (the sweeper
// audits as "countersign [sweeper]").
func (tx *Tx) AuditAs(principal string, sp Space, action, detail string) (approvals.Entry, error) {
	now := time.Now()
	if tx.call != nil {
		now = tx.call.Now
	}
	return approvals.Append(tx.Tx, tx.call.bot.key, now, approvals.Entry{
		Principal: principal, UserID: sp.UserID, AgentID: sp.AgentID, RunID: sp.RunID,
		Action: action, Detail: detail,
	})
}

// BeginShutdown tells long-running calls (long polls) to return now: the
// server is stopping. Safe to call more than once.
func (b *Bot) BeginShutdown() { b.closingOnce.Do(func() { close(b.closing) }) }

// Closing returns a channel closed when shutdown begins.
func (b *Bot) Closing() <-chan struct{} { return b.closing }

// SystemCall returns a Call for work Countersign does on its own behalf (the
// sweeper, outbox bookkeeping), audited as "countersign [system]".
func (b *Bot) SystemCall(now time.Time) *Call {
	return &Call{bot: b, Caller: &Caller{Principal: Principal{ID: "system", Name: "countersign", Role: policy.RoleAdmin, Kind: "service"}, Surface: "system"}, Now: now, Tool: &Tool{Name: "system"}}
}

func (c *Call) String() string { return fmt.Sprintf("%s by %s", c.Tool.Name, c.Caller) }
