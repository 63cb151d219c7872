package bot

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
)

// The audit of read-only answers.
//
// A write (remember, a decision, a denial) commits its audit entry in the
// same durable transaction as the change, always. A read-only answer (the
// verdict of check_before_act or safe_recall, a recall) changes nothing, so
// while a ReadAudit runs its entry is not made durable before the answer:
// the answer is computed in a read transaction, its entry is put on a
// bounded in-memory queue, and one background appender commits the queue in
// batches (one durable transaction, one head signature, per batch). The
// call waits for room when the queue is full, up to ReadAuditOptions.Wait;
// an answer whose entry cannot be queued, or any answer after a commit of
// the appender failed, is refused (the gates answer BLOCKED or WITHHELD):
// no answer is given that cannot be recorded. A crash loses at most the
// entries still queued; the next start appends unclean_restart to say so.

// Read-audit modes.
const (
	// ReadAuditQueued answers read verdicts before their audit entry is
	// durable; the entry is committed by the background appender.
	ReadAuditQueued = "queued"
	// ReadAuditDurable commits each read verdict's audit entry in its own
	// durable transaction before the verdict is answered.
	ReadAuditDurable = "durable"
)

// Defaults of ReadAuditOptions.
const (
	DefaultReadQueueSize = 1024
	DefaultReadQueueWait = 50 * time.Millisecond
	readAuditBatch       = 256
)

// The reasons a read answer is refused when its audit entry cannot be
// recorded (a bullet of BLOCKED / WITHHELD).
const (
	ReasonAuditBacklog = "audit backlog — this verdict could not be recorded; retry shortly"
	reasonAuditFailed  = "audit failure — this verdict could not be recorded: the audit log's last write failed (see the server log)"
)

// unrecordedError is returned by Call.AuditRead when the entry of a
// read-only answer cannot be recorded. The answer must not be given: the
// gates answer BLOCKED / WITHHELD with Reason as the reason.
type unrecordedError struct {
	Reason string
	Err    error // the appender's failure, if that is the cause
}

func (e *unrecordedError) Error() string { return e.Reason }
func (e *unrecordedError) Unwrap() error { return e.Err }

// Unrecorded reports whether err says a read answer could not be recorded,
// and the reason line to show instead of the answer.
func Unrecorded(err error) (reason string, ok bool) {
	var u *unrecordedError
	if errors.As(err, &u) {
		return u.Reason, true
	}
	return "", false
}

// ReadAuditOptions configure StartReadAudit.
type ReadAuditOptions struct {
	// Mode is ReadAuditQueued (the default when empty) or ReadAuditDurable.
	Mode string
	// Size is how many read entries may wait to be committed; zero means
	// DefaultReadQueueSize. It bounds what a crash can lose.
	Size int
	// Wait is how long a read answer waits for room in a full queue before
	// it is refused; zero means DefaultReadQueueWait.
	Wait time.Duration
	// Runs tells this run from the others serving the same store at the
	// same time (replicas on one database): each keeps a running marker
	// of its own, and only the markers of runs that are no longer alive
	// are reported as unclean_restart. Nil: one process owns the store
	// (bbolt), so any marker found at start is the previous run's.
	Runs Runs
	// Host names this process in its marker (for the unclean_restart entry
	// of a replica that died); empty is allowed.
	Host string
}

// Runs claims and checks the liveness of serving runs that share a store.
type Runs interface {
	// Claim starts this run: it returns an id no live run holds, held as
	// alive until release is called or the process dies.
	Claim(ctx context.Context) (id string, release func(), err error)
	// Alive reports whether the run id still holds its claim.
	Alive(ctx context.Context, id string) (bool, error)
}

// ReadAudit is a serving run's audit of read-only answers: the running
// marker and, in queued mode, the queue and its appender.
type ReadAudit struct {
	b    *Bot
	mode string
	wait time.Duration

	ch      chan readEntry
	stop    chan struct{}
	stopped chan struct{}

	mu     sync.RWMutex // held for reading while an entry is being queued
	closed bool

	queued   atomic.Uint64 // entries queued so far
	flushing atomic.Int32  // callers waiting in flush (for tests)
	pmu      sync.Mutex
	done     uint64        // entries the appender has finished with
	moved    chan struct{} // closed (and replaced) whenever done grows
	failed   error         // the first failed commit; sticky

	marker  []byte // the key of this run's marker
	release func() // ends this run's claim (Runs); nil without one

	closeOnce sync.Once
	closeErr  error
}

type readEntry struct {
	now   time.Time
	entry approvals.Entry
}

// Run-marker storage: a marker set while a run serves, cleared at clean
// stop. One process: keyRunning. Replicas (ReadAuditOptions.Runs): one
// marker per run, keyRunning + "/" + the run's id.
const (
	bucketRun  = "run"
	keyRunning = "running"
)

// runMarker is the value of the running marker.
type runMarker struct {
	Started      time.Time `json:"started"`
	ReadVerdicts string    `json:"read_verdicts"`
	Host         string    `json:"host,omitempty"`
	PID          int       `json:"pid,omitempty"`
}

// ActionUncleanRestart is the audit action appended at start when the
// previous run did not stop cleanly.
const ActionUncleanRestart = "unclean_restart"

// StartReadAudit begins a serving run. When the previous run's marker is
// still in the store (it did not stop cleanly: a crash, kill -9 or power
// loss) it appends an unclean_restart entry saying what may be missing;
// then it sets the marker and, in queued mode, starts the appender. Stop
// the run with Close once intake has stopped: it drains the queue and
// clears the marker. Without a running ReadAudit (tests, one-shot
// commands) every read answer is audited durably before it is given.
func (b *Bot) StartReadAudit(ctx context.Context, o ReadAuditOptions) (*ReadAudit, error) {
	if b.readAudit.Load() != nil {
		return nil, errors.New("read audit: a run is already started; Close it first")
	}
	switch o.Mode {
	case "":
		o.Mode = ReadAuditQueued
	case ReadAuditQueued, ReadAuditDurable:
	default:
		return nil, fmt.Errorf("read audit mode %q: want %s or %s", o.Mode, ReadAuditQueued, ReadAuditDurable)
	}
	if o.Size <= 0 {
		o.Size = DefaultReadQueueSize
	}
	if o.Wait <= 0 {
		o.Wait = DefaultReadQueueWait
	}
	now := b.now()
	sys := b.SystemCall(now)
	own := []byte(keyRunning)
	var stale map[string]bool // replicas: the markers of runs no longer alive
	var release func()
	if o.Runs != nil {
		id, rel, err := o.Runs.Claim(ctx)
		if err != nil {
			return nil, fmt.Errorf("read audit: claim this run: %w", err)
		}
		own, release = []byte(keyRunning+"/"+id), rel
		if stale, err = staleRuns(ctx, b.store, o.Runs); err != nil {
			release()
			return nil, fmt.Errorf("read audit: find the runs that stopped: %w", err)
		}
	}
	err := b.Update(ctx, sys, func(tx *Tx) error {
		var left [][2][]byte // the markers to report, with their values
		err := kv.Prefix(tx, bucketRun, []byte(keyRunning), func(k, v []byte) error {
			if o.Runs == nil || stale[string(k)] { // one process: every marker is a past run's
				left = append(left, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, m := range left {
			if _, err := tx.AuditAs(sys.Caller.String(), Space{}, ActionUncleanRestart, uncleanDetail(m[1])); err != nil {
				return err
			}
			if err := tx.Delete(bucketRun, m[0]); err != nil {
				return err
			}
		}
		rm := runMarker{Started: now.UTC(), ReadVerdicts: o.Mode}
		if o.Runs != nil {
			rm.Host, rm.PID = o.Host, os.Getpid() // which replica, should it die
		}
		m, _ := json.Marshal(rm)
		return tx.Put(bucketRun, own, m)
	})
	if err != nil {
		if release != nil {
			release()
		}
		return nil, fmt.Errorf("read audit: mark the run: %w", err)
	}
	q := &ReadAudit{b: b, mode: o.Mode, wait: o.Wait, moved: make(chan struct{}), marker: own, release: release}
	if o.Mode == ReadAuditQueued {
		q.ch = make(chan readEntry, o.Size)
		q.stop = make(chan struct{})
		q.stopped = make(chan struct{})
		go q.loop()
		b.readAudit.Store(q)
	}
	return q, nil
}

// staleRuns returns the keys of the markers (keyRunning + "/" + id) whose
// run no longer holds its claim, and the marker an older binary kept for
// the whole store (keyRunning). A run that is alive is never reported: its
// claim was taken before its marker was written.
func staleRuns(ctx context.Context, db kv.Store, runs Runs) (map[string]bool, error) {
	var keys []string
	err := db.View(ctx, func(tx kv.Tx) error {
		keys = keys[:0]
		return kv.Prefix(tx, bucketRun, []byte(keyRunning), func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	stale := map[string]bool{}
	for _, k := range keys {
		id, ok := strings.CutPrefix(k, keyRunning+"/")
		if !ok {
			stale[k] = k == keyRunning
			continue
		}
		alive, err := runs.Alive(ctx, id)
		if err != nil {
			return nil, err
		}
		stale[k] = !alive
	}
	return stale, nil
}

// uncleanDetail is the detail of unclean_restart, from the marker the
// previous run left.
func uncleanDetail(marker []byte) string {
	var m runMarker
	if json.Unmarshal(marker, &m) != nil || m.Started.IsZero() {
		return "the previous run did not stop cleanly (crash, kill or power loss); read verdicts (check_before_act, safe_recall, recall) answered in its last moments may be missing from the chain; writes and decisions are all recorded"
	}
	started := m.Started.UTC().Format(time.RFC3339)
	if m.Host != "" || m.PID != 0 {
		// A replica's marker: say which one.
		started += ", on " + cmp.Or(m.Host, "a host") + " as pid " + strconv.Itoa(m.PID)
	}
	if m.ReadVerdicts == ReadAuditDurable {
		return "the previous run (started " + started + ") did not stop cleanly (crash, kill or power loss); it recorded every answer before giving it, so no entry is missing"
	}
	return "the previous run (started " + started + ") did not stop cleanly (crash, kill or power loss); read verdicts (check_before_act, safe_recall, recall) answered in its last moments may be missing from the chain; writes and decisions are all recorded"
}

// Run returns the id of this run's claim (ReadAuditOptions.Runs), or ""
// without one.
func (q *ReadAudit) Run() string {
	id, _ := strings.CutPrefix(string(q.marker), keyRunning+"/")
	if id == keyRunning {
		return ""
	}
	return id
}

// Close ends the run: no entry is queued any more (later read answers are
// audited durably before they are given), the queue is drained into the
// store, and the running marker is cleared. Call it after intake has
// stopped and before the store closes. It waits for the queue to drain
// only as long as ctx allows (a store that does not answer holds the
// appender): then it returns ctx's error and leaves the marker, so the
// next start records unclean_restart. A second Close returns the first's
// result.
func (q *ReadAudit) Close(ctx context.Context) error {
	q.closeOnce.Do(func() { q.closeErr = q.close(ctx) })
	return q.closeErr
}

func (q *ReadAudit) close(ctx context.Context) error {
	// The claim ends whatever happens: a marker left behind is then
	// reported by the next run to start.
	defer q.endClaim()
	if q.ch != nil {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
		q.b.readAudit.CompareAndSwap(q, nil)
		close(q.stop)
		select {
		case <-q.stopped:
		case <-ctx.Done():
			return fmt.Errorf("read audit: the queue did not drain in time: %w", ctx.Err())
		}
		if err := q.err(); err != nil {
			// Entries were lost: leave the marker, so the next start says so.
			return fmt.Errorf("read audit: %w", err)
		}
	}
	return q.b.Update(ctx, q.b.SystemCall(q.b.now()), func(tx *Tx) error {
		return tx.Delete(bucketRun, q.marker)
	})
}

// endClaim ends this run's claim (Runs), once.
func (q *ReadAudit) endClaim() {
	if q.release != nil {
		q.release()
		q.release = nil
	}
}

// enqueue queues e. queued is false when the queue no longer takes entries
// (it is closing): the caller then records e itself.
func (q *ReadAudit) enqueue(ctx context.Context, e readEntry) (queued bool, err error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return false, nil
	}
	if err := q.err(); err != nil {
		return true, &unrecordedError{Reason: reasonAuditFailed, Err: err}
	}
	select {
	case q.ch <- e:
		q.queued.Add(1)
		return true, nil
	default:
	}
	t := time.NewTimer(q.wait)
	defer t.Stop()
	select {
	case q.ch <- e:
		q.queued.Add(1)
		return true, nil
	case <-t.C:
		q.b.log.Warn("audit backlog: a read answer was refused because its audit entry could not be queued", "queued", len(q.ch), "wait", q.wait)
		return true, &unrecordedError{Reason: ReasonAuditBacklog}
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

func (q *ReadAudit) err() error {
	q.pmu.Lock()
	defer q.pmu.Unlock()
	return q.failed
}

// loop is the appender: it blocks for the first queued entry, takes
// whatever else is queued without waiting, and commits them in one durable
// transaction; on stop it commits what is left and returns.
func (q *ReadAudit) loop() {
	defer close(q.stopped)
	batch := make([]readEntry, 0, readAuditBatch)
	for {
		batch = batch[:0]
		select {
		case e := <-q.ch:
			batch = append(batch, e)
		case <-q.stop:
			// Nothing new can arrive (closed is set): drain what is left.
			for {
				batch = batch[:0]
			drain:
				for len(batch) < readAuditBatch {
					select {
					case e := <-q.ch:
						batch = append(batch, e)
					default:
						break drain
					}
				}
				if len(batch) == 0 {
					return
				}
				q.commit(batch)
			}
		}
	collect:
		for len(batch) < readAuditBatch {
			select {
			case e := <-q.ch:
				batch = append(batch, e)
			default:
				break collect
			}
		}
		q.commit(batch)
	}
}

// commit appends a batch in one durable transaction. A failure is sticky:
// from then on every read answer is refused (fail closed). A store that is
// only unavailable (kv.ErrUnavailable: a database that is down or
// restarting) is waited for instead: the batch is committed again until it
// commits, while the queue fills and the gates refuse new answers as a
// backlog; once the store is back the answers resume by themselves. (If the
// store cannot say whether a commit happened, a retry may record those
// entries twice; never zero times.) A stop ends the wait.
func (q *ReadAudit) commit(batch []readEntry) {
	err := q.append(batch)
	for wait := 100 * time.Millisecond; err != nil && errors.Is(err, kv.ErrUnavailable); wait = min(2*wait, 2*time.Second) {
		q.b.log.Warn("audit: the store is unavailable; read answers wait for their audit entries to commit", "entries", len(batch), "retry_in", wait, "err", err)
		select {
		case <-q.stop:
			wait = 0
		case <-time.After(wait):
		}
		if err = q.append(batch); wait == 0 {
			break
		}
	}
	q.pmu.Lock()
	if err != nil && q.failed == nil {
		q.failed = err
	}
	q.done += uint64(len(batch))
	close(q.moved)
	q.moved = make(chan struct{})
	q.pmu.Unlock()
	if err != nil {
		q.b.log.Error("audit: read answers were given but their audit entries could not be committed; refusing read answers from now on (restart Countersign once the store is healthy)",
			"entries", len(batch), "err", err)
	}
}

func (q *ReadAudit) append(batch []readEntry) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("read audit: append panicked: %v", v)
		}
	}()
	return q.b.store.Update(context.Background(), func(t kv.Tx) error {
		for _, e := range batch {
			if _, err := approvals.Append(t, q.b.key, e.now, e.entry); err != nil {
				return err
			}
		}
		return nil
	})
}

// flush waits until every entry queued before it was called has been
// handled by the appender.
func (q *ReadAudit) flush(ctx context.Context) error {
	target := q.queued.Load()
	q.flushing.Add(1)
	defer q.flushing.Add(-1)
	for {
		q.pmu.Lock()
		done, moved := q.done, q.moved
		q.pmu.Unlock()
		if done >= target {
			return nil
		}
		select {
		case <-moved:
		case <-q.stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AuditRead records the audit entry of a read-only answer of this call (a
// gate's verdict, a recall) for the call's caller and space. With a queued
// ReadAudit running, the entry is queued and AuditRead returns at once (or
// after waiting for room); otherwise it is committed in its own durable
// transaction before AuditRead returns. An *unrecordedError means the entry
// cannot be recorded: the answer must not be given (see Unrecorded).
func (c *Call) AuditRead(ctx context.Context, action, detail string) error {
	if rc := collectorOf(ctx); rc != nil {
		rc.add(action, detail) // a page view records its reads as one (readview.go)
		return nil
	}
	if q := c.bot.readAudit.Load(); q != nil {
		queued, err := q.enqueue(ctx, readEntry{now: c.Now, entry: approvals.Entry{
			Principal: c.Caller.String(), UserID: c.Space.UserID, AgentID: c.Space.AgentID, RunID: c.Space.RunID,
			Action: action, Detail: detail,
		}})
		if queued {
			return err
		}
	}
	return c.Update(ctx, func(tx *Tx) error { return tx.Audit(action, detail) })
}

// FlushAudit waits until every read entry queued so far is committed (or
// its commit failed), so that a reader of the audit trail sees every
// answer given before it asked. It returns at once without a ReadAudit.
func (b *Bot) FlushAudit(ctx context.Context) error {
	if q := b.readAudit.Load(); q != nil {
		return q.flush(ctx)
	}
	return nil
}

// AuditEntry is one entry of the audit chain as audit_log answers it
// (its data.entries), for a surface that shows or exports them. An alias
// of approvals.Entry, named here because adapters may not import the
// domain packages (the console's audit pages decode it).
type AuditEntry = approvals.Entry
