package bot

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// gateStore lets a test hold or fail the store's Updates.
type gateStore struct {
	kv.Store
	mu      sync.Mutex
	hold    chan struct{} // when not nil, Update waits for it to close
	entered chan struct{} // signalled (non-blocking) when an Update waits
	fail    error         // when not nil, Update fails with it
}

func (s *gateStore) Update(ctx context.Context, fn func(kv.Tx) error) error {
	s.mu.Lock()
	hold, fail := s.hold, s.fail
	s.mu.Unlock()
	if hold != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-hold
	}
	if fail != nil {
		return fail
	}
	return s.Store.Update(ctx, fn)
}

// failWith makes every Update fail with err (nil: Updates go through).
func (s *gateStore) failWith(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// holdUpdates makes every Update wait until release.
func (s *gateStore) holdUpdates() {
	s.mu.Lock()
	s.hold = make(chan struct{})
	s.mu.Unlock()
}

// release lets the held Updates through and holds no new ones. It may be
// called more than once.
func (s *gateStore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

type peekArgs struct {
	Space
	Subject string `json:"subject" jsonschema:"what to peek at"`
}

type readAuditEnv struct {
	db    *bolt.DB
	store *gateStore
	key   ed25519.PrivateKey
	b     *Bot
	agent *Caller
	audit *Caller
}

// newReadAuditEnv is a bot with a read tool "peek" that audits through
// AuditRead (answering BLOCKED when it cannot), and a verify-capability
// tool "trail" that counts the chain's entries.
func newReadAuditEnv(t *testing.T, path string) *readAuditEnv {
	t.Helper()
	db, err := bolt.Open(path, bolt.Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	return newReadAuditBot(t, db, key)
}

func newReadAuditBot(t *testing.T, db *bolt.DB, key ed25519.PrivateKey) *readAuditEnv {
	t.Helper()
	e := &readAuditEnv{db: db, store: &gateStore{Store: db, entered: make(chan struct{}, 1)}, key: key}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b, err := New(Options{Store: e.store, SigningKey: key, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Register(
		Tool{Name: "peek", Description: "a read verdict", Capability: policy.CapRead, Args: peekArgs{},
			Handler: func(ctx context.Context, c *Call, a any) (Result, error) {
				s := a.(*peekArgs).Subject
				if err := c.AuditRead(ctx, "check_before_act", s+": SAFE"); err != nil {
					if reason, ok := Unrecorded(err); ok {
						return Result{Text: policy.RenderCheck(s, policy.VerdictBlocked, []string{reason}, nil)}, nil
					}
					return Result{}, err
				}
				return Result{Text: policy.RenderCheck(s, policy.VerdictSafe, nil, []string{s})}, nil
			}},
		Tool{Name: "trail", Description: "count the audit entries", Capability: policy.CapVerify, Args: struct{}{},
			Handler: func(ctx context.Context, c *Call, _ any) (Result, error) {
				n := 0
				err := c.View(ctx, func(tx kv.Tx) error {
					return tx.Ascend("audit", nil, nil, func(_, _ []byte) error { n++; return nil })
				})
				return Result{Text: fmt.Sprint(n)}, err
			}},
	)
	if err != nil {
		t.Fatal(err)
	}
	e.b = b
	e.agent = &Caller{Principal: Principal{ID: "prin_a", Name: "agent", Role: policy.RoleAgent, Kind: "agent"}, Surface: "http"}
	e.audit = &Caller{Principal: Principal{ID: "prin_x", Name: "auditor", Role: policy.RoleAuditor, Kind: "person"}, Surface: "http"}
	return e
}

// start begins a read-audit run and registers its end with t.Cleanup (run
// before the store closes): held Updates are released first, then the run
// is closed within a bound. A test that fails while the appender is held
// so reports its own failure instead of hanging in Close until the test
// binary times out.
func (e *readAuditEnv) start(t *testing.T, o ReadAuditOptions) *ReadAudit {
	t.Helper()
	q, err := e.b.StartReadAudit(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.store.release()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := q.Close(ctx); errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("read audit at the end of the test: %v", err)
		}
	})
	return q
}

func (e *readAuditEnv) peek(t *testing.T, subject string) string {
	t.Helper()
	r, err := e.b.Call(context.Background(), e.agent, "peek", []byte(`{"subject":"`+subject+`"}`))
	if err != nil {
		t.Fatalf("peek: %v", err)
	}
	return r.Text
}

// entries returns the chain's actions and details, oldest first, and checks
// that it verifies.
func (e *readAuditEnv) entries(t *testing.T) []string {
	t.Helper()
	rep, err := approvals.Verify(context.Background(), e.db, e.key.Public().(ed25519.PublicKey))
	if err != nil || !rep.Intact {
		t.Fatalf("verify = %+v, %v; want an intact chain", rep, err)
	}
	var out []string
	err = e.db.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend("audit", nil, nil, func(k, v []byte) error {
			en, err := approvals.DecodeRow(k, v)
			if err != nil {
				return err
			}
			out = append(out, en.Action+" "+en.Detail)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAuditReadWithoutQueueIsDurableAtOnce(t *testing.T) {
	e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "r.db"))
	if got := e.peek(t, "x"); !strings.HasPrefix(got, "✅ SAFE") {
		t.Fatalf("peek = %q, want it to start with %q", got, "✅ SAFE")
	}
	if got := e.entries(t); fmt.Sprint(got) != "[check_before_act x: SAFE]" {
		t.Fatalf("chain = %v, want %s", got, "[check_before_act x: SAFE]")
	}
}

// TestReadAuditQueueRecordsEveryAnswer: queued entries are committed by the
// appender, visible to an audit reader at once (the verify tools flush),
// and all of them are in the chain after Close.
func TestReadAuditQueueRecordsEveryAnswer(t *testing.T) {
	e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "r.db"))
	ctx := context.Background()
	q, err := e.b.StartReadAudit(ctx, ReadAuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q.mode != ReadAuditQueued {
		t.Fatalf("default mode = %q, want %q", q.mode, ReadAuditQueued)
	}
	const n = 200
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := e.peek(t, fmt.Sprintf("s%03d", i)); !strings.HasPrefix(got, "✅ SAFE") {
				t.Errorf("peek %d = %q, want it to start with %q", i, got, "✅ SAFE")
			}
		}()
	}
	wg.Wait()
	// An audit reader sees every answer given before it asked.
	r, err := e.b.Call(ctx, e.audit, "trail", []byte(`{}`))
	if err != nil || r.Text != fmt.Sprint(n) {
		t.Fatalf("trail = %q, %v; want %d", r.Text, err, n)
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.entries(t)
	if len(got) != n {
		t.Fatalf("%d entries, want %d", len(got), n)
	}
	seen := map[string]bool{}
	for _, g := range got {
		seen[g] = true
	}
	for i := 0; i < n; i++ {
		if w := fmt.Sprintf("check_before_act s%03d: SAFE", i); !seen[w] {
			t.Fatalf("the chain has no %q, want every answer recorded", w)
		}
	}
	// After Close, a read answer is audited durably before it is given.
	e.peek(t, "late")
	if got := e.entries(t); got[len(got)-1] != "check_before_act late: SAFE" {
		t.Fatalf("last entry after Close = %q, want %q", got[len(got)-1], "check_before_act late: SAFE")
	}
}

// TestAuditReaderWaitsForQueuedEntries: a verify-capability tool called
// while an entry is queued but not yet committed waits for its commit.
func TestAuditReaderWaitsForQueuedEntries(t *testing.T) {
	e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "r.db"))
	ctx := context.Background()
	e.start(t, ReadAuditOptions{})
	e.store.holdUpdates()
	e.peek(t, "held")
	<-e.store.entered // the appender is committing it
	res := make(chan string, 1)
	go func() {
		r, err := e.b.Call(ctx, e.audit, "trail", []byte(`{}`))
		if err != nil {
			t.Error(err)
		}
		res <- r.Text
	}()
	// Wait until the reader waits for the appender; it must not answer
	// before the entry is committed.
	for deadline := time.Now().Add(10 * time.Second); e.b.readAudit.Load().flushing.Load() == 0; {
		select {
		case got := <-res:
			t.Fatalf("the audit reader answered %q before the queued entry was committed", got)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the audit reader never waited for the queue")
		}
		runtime.Gosched()
	}
	e.store.release()
	if got := <-res; got != "1" {
		t.Fatalf("trail = %q, want 1", got)
	}
}

// TestReadAuditBacklogFailsClosed: with the appender stuck and the queue
// full, a read answer waits up to Wait and is then refused (BLOCKED with
// the backlog reason), never SAFE; once the appender moves, answers resume.
func TestReadAuditBacklogFailsClosed(t *testing.T) {
	e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "r.db"))
	ctx := context.Background()
	q := e.start(t, ReadAuditOptions{Size: 1, Wait: time.Millisecond})
	e.store.holdUpdates()
	if got := e.peek(t, "a"); !strings.HasPrefix(got, "✅ SAFE") {
		t.Fatalf("first = %q, want it to start with %q", got, "✅ SAFE")
	}
	<-e.store.entered // the appender holds "a"
	if got := e.peek(t, "b"); !strings.HasPrefix(got, "✅ SAFE") {
		t.Fatalf("second (fills the queue) = %q, want it to start with %q", got, "✅ SAFE")
	}
	want := "⛔ BLOCKED — do NOT act on 'c':\n  • " + ReasonAuditBacklog
	if got := e.peek(t, "c"); got != want {
		t.Fatalf("third = %q, want %q", got, want)
	}
	e.store.release()
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.entries(t); fmt.Sprint(got) != "[check_before_act a: SAFE check_before_act b: SAFE]" {
		t.Fatalf("chain = %v, want %s (the refused verdict must not be recorded as given)", got, "[check_before_act a: SAFE check_before_act b: SAFE]")
	}
}

// TestReadAuditFailureFailsClosed: once a commit of the appender fails,
// every later read answer is refused, Close reports it, and the marker
// stays so that the next start records unclean_restart.
func TestReadAuditFailureFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	e := newReadAuditEnv(t, path)
	ctx := context.Background()
	q, err := e.b.StartReadAudit(ctx, ReadAuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	broken := errors.New("disk on fire")
	e.store.failWith(broken)
	e.peek(t, "lost") // answered before the failure was known
	if err := e.b.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	want := "⛔ BLOCKED — do NOT act on 'after':\n  • " + reasonAuditFailed
	if got := e.peek(t, "after"); got != want {
		t.Fatalf("after the failure = %q, want %q", got, want)
	}
	if err := q.Close(ctx); !errors.Is(err, broken) {
		t.Fatalf("Close = %v, want the failure", err)
	}
	e.store.failWith(nil)
	// The next run finds the marker.
	q2, err := e.b.StartReadAudit(ctx, ReadAuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close(ctx)
	got := e.entries(t)
	if len(got) != 1 || !strings.HasPrefix(got[0], "unclean_restart the previous run (started 2026-11-30T12:00:00Z) did not stop cleanly") {
		t.Fatalf("chain = %v, want one entry starting %q", got, "unclean_restart the previous run (started 2026-11-30T12:00:00Z) did not stop cleanly")
	}
}

// TestUncleanRestart: a run that ends without Close (a crash) leaves its
// marker; the next start appends unclean_restart saying what may be
// missing, and a clean stop leaves nothing for the next start to report.
func TestUncleanRestart(t *testing.T) {
	tests := []struct {
		name   string
		marker string // the previous run's marker; "" for a clean stop
		want   string // the unclean_restart detail's distinctive part; "" for none
	}{
		{"queued run crashed", `{"started":"2026-11-29T08:00:00Z","read_verdicts":"queued"}`,
			"unclean_restart the previous run (started 2026-11-29T08:00:00Z) did not stop cleanly (crash, kill or power loss); read verdicts (check_before_act, safe_recall, recall) answered in its last moments may be missing from the chain"},
		{"durable run crashed", `{"started":"2026-11-29T08:00:00Z","read_verdicts":"durable"}`,
			"unclean_restart the previous run (started 2026-11-29T08:00:00Z) did not stop cleanly (crash, kill or power loss); it recorded every answer before giving it, so no entry is missing"},
		{"unreadable marker", `not json`,
			"unclean_restart the previous run did not stop cleanly (crash, kill or power loss); read verdicts (check_before_act, safe_recall, recall) answered in its last moments may be missing"},
		{"clean stop", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "r.db"))
			ctx := context.Background()
			if tt.marker != "" {
				if err := e.db.Update(ctx, func(tx kv.Tx) error { return tx.Put(bucketRun, []byte(keyRunning), []byte(tt.marker)) }); err != nil {
					t.Fatal(err)
				}
			} else {
				q, err := e.b.StartReadAudit(ctx, ReadAuditOptions{})
				if err != nil {
					t.Fatal(err)
				}
				e.peek(t, "x")
				if err := q.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			q, err := e.b.StartReadAudit(ctx, ReadAuditOptions{Mode: ReadAuditDurable})
			if err != nil {
				t.Fatal(err)
			}
			got := e.entries(t)
			var unclean []string
			for _, g := range got {
				if strings.HasPrefix(g, ActionUncleanRestart) {
					unclean = append(unclean, g)
				}
			}
			switch {
			case tt.want == "" && len(unclean) != 0:
				t.Fatalf("a clean stop was reported: %v, want no unclean_restart", unclean)
			case tt.want != "" && (len(unclean) != 1 || !strings.HasPrefix(unclean[0], tt.want)):
				t.Fatalf("unclean_restart = %v, want one starting %q", unclean, tt.want)
			}
			// The durable run marks itself and clears the marker on Close.
			if err := q.Close(ctx); err != nil {
				t.Fatal(err)
			}
			var m []byte
			_ = e.db.View(ctx, func(tx kv.Tx) error { m, _ = tx.Get(bucketRun, []byte(keyRunning)); return nil })
			if m != nil {
				t.Fatalf("marker after a clean Close = %s, want none", m)
			}
		})
	}
}

func TestStartReadAuditRejectsUnknownModeAndSecondRun(t *testing.T) {
	e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "r.db"))
	ctx := context.Background()
	if _, err := e.b.StartReadAudit(ctx, ReadAuditOptions{Mode: "later"}); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
	q, err := e.b.StartReadAudit(ctx, ReadAuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.StartReadAudit(ctx, ReadAuditOptions{}); err == nil {
		t.Fatal("a second run started while the first was running")
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	q, err = e.b.StartReadAudit(ctx, ReadAuditOptions{})
	if err != nil {
		t.Fatalf("a run after Close: %v", err)
	}
	_ = q.Close(ctx)
}

// TestReadAuditCloseRacesWithAnswers: answers given while the run closes are
// all recorded, through the queue or durably after it closed.
func TestReadAuditCloseRacesWithAnswers(t *testing.T) {
	e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "r.db"))
	ctx := context.Background()
	q, err := e.b.StartReadAudit(ctx, ReadAuditOptions{Size: 8})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	safe := 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if strings.HasPrefix(e.peek(t, fmt.Sprintf("r%03d", i)), "✅ SAFE") {
				mu.Lock()
				safe++
				mu.Unlock()
			}
		}()
		if i == n/2 {
			wg.Add(1)
			go func() { defer wg.Done(); _ = q.Close(ctx) }()
		}
	}
	wg.Wait()
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.entries(t); len(got) != safe {
		t.Fatalf("%d entries, want %d (one per SAFE answer)", len(got), safe)
	}
}

// TestReadAuditWaitsOutAnUnavailableStore: a store that is only
// unavailable (a database restarting) does not fail the queue for good:
// the entries of answers already given are committed once it is back, and
// answers resume without a restart.
func TestReadAuditWaitsOutAnUnavailableStore(t *testing.T) {
	e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "u.db"))
	ctx := context.Background()
	q, err := e.b.StartReadAudit(ctx, ReadAuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(ctx)
	e.store.failWith(fmt.Errorf("postgres: %w: connection refused", kv.ErrUnavailable))
	e.peek(t, "given") // answered; its entry waits for the store
	time.Sleep(300 * time.Millisecond)
	e.store.failWith(nil)
	if err := e.b.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.peek(t, "after"); !strings.Contains(got, "SAFE") {
		t.Fatalf("after the store came back: %q, want it to contain %q", got, "SAFE")
	}
	if err := e.b.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(e.entries(t), "\n")
	if !strings.Contains(joined, "given: SAFE") || !strings.Contains(joined, "after: SAFE") {
		t.Fatalf("chain = %s; want both answers recorded (given: SAFE, after: SAFE)", joined)
	}
}

// TestReadAuditCloseReturnsWhileTheAppenderIsStuck: Close waits for the
// queue to drain only as long as its context allows. With the appender
// stuck in a store that does not answer, Close returns the context's error
// (a second Close the same), leaves the run marker, and once the store
// answers the queued entry is still committed; the next run says the last
// one did not stop cleanly.
func TestReadAuditCloseReturnsWhileTheAppenderIsStuck(t *testing.T) {
	e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "s.db"))
	q := e.start(t, ReadAuditOptions{})
	e.store.holdUpdates()
	if got := e.peek(t, "stuck"); !strings.HasPrefix(got, "✅ SAFE") {
		t.Fatalf("peek = %q, want it to start with %q", got, "✅ SAFE")
	}
	<-e.store.entered // the appender is committing it, and stays there
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := q.Close(ctx)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "did not drain") {
		t.Fatalf("Close with the appender stuck = %v, want the queue did not drain: context canceled", err)
	}
	if again := q.Close(context.Background()); again != err {
		t.Fatalf("second Close = %v, want the first's %v", again, err)
	}
	e.store.release()
	<-q.stopped // the appender commits what it held, then stops
	var marker []byte
	if err := e.db.View(context.Background(), func(tx kv.Tx) error {
		var err error
		marker, err = tx.Get(bucketRun, []byte(keyRunning))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if marker == nil {
		t.Fatal("the run marker was cleared by a Close that did not drain the queue")
	}
	if got := e.entries(t); fmt.Sprint(got) != "[check_before_act stuck: SAFE]" {
		t.Fatalf("chain = %v, want the held entry committed", got)
	}
	e.start(t, ReadAuditOptions{})
	got := e.entries(t)
	if len(got) != 2 || !strings.HasPrefix(got[1], "unclean_restart the previous run") {
		t.Fatalf("chain after the next start = %v, want unclean_restart", got)
	}
}
