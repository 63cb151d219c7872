package approvals

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/logtest"
	"github.com/countersign/countersign/kv"
)

// anchorsIn reads the anchor file, failing the test when it cannot.
func anchorsIn(t *testing.T, path string) []Anchor {
	t.Helper()
	as, err := ReadAnchors(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return as
}

// runUntil runs loop until seen reports what the test waits for (polled:
// the loops' only effects are the anchor file and the log), then ends its
// context and returns what the loop returned. after runs between the two,
// with the loop still running.
func runUntil(t *testing.T, loop func(context.Context) error, seen func() bool, after func()) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop(ctx) }()
	for !seen() {
		time.Sleep(time.Millisecond)
	}
	if after != nil {
		after()
	}
	cancel()
	return <-done
}

// TestAnchoringSingleAnchorsAtStartAndStop: a single writer's loop
// anchors the head when it starts (and nothing more while the head stays
// put), and final anchors the head the writers left behind.
func TestAnchoringSingleAnchorsAtStartAndStop(t *testing.T) {
	db, key := openStore(t), testKey(1)
	appendN(t, db, key, 2)
	file := filepath.Join(t.TempDir(), "anchors")
	var log logtest.Buffer
	o := Anchoring{Store: db, Key: key, File: file, Every: time.Hour, Now: func() time.Time { return t0 }, Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	run, final := o.Single(Anchor{})
	started := func() bool { as, _ := ReadAnchors(file); return len(as) == 1 }
	if err := runUntil(t, run, started, nil); err != nil {
		t.Fatalf("run: %v, want nil when its context ends", err)
	}
	if as := anchorsIn(t, file); len(as) != 1 || as[0].Seq != 2 {
		t.Fatalf("after start: anchors %+v, want one at seq 2", as)
	}
	final() // the head has not moved: nothing written
	if as := anchorsIn(t, file); len(as) != 1 {
		t.Fatalf("final on an unmoved head wrote again: %+v, want the one anchor", as)
	}
	appendN(t, db, key, 1)
	final()
	if as := anchorsIn(t, file); len(as) != 2 || as[1].Seq != 3 {
		t.Fatalf("after final: anchors %+v, want a second at seq 3", as)
	}
	if got := log.String(); !strings.Contains(got, "when=start") || !strings.Contains(got, "when=stop") {
		t.Fatalf("log %q, want the start and stop anchors said", got)
	}
}

// TestAnchoringLeadAnchorsTheFinalHeadOnlyWhenTheServerStops: a leader
// anchors when it takes the lead; one that loses the lead leaves the head
// written since to the next leader; one whose server is closing anchors
// it before it returns.
func TestAnchoringLeadAnchorsTheFinalHeadOnlyWhenTheServerStops(t *testing.T) {
	for _, stopping := range []bool{false, true} {
		db, key := openStore(t), testKey(1)
		appendN(t, db, key, 1)
		file := filepath.Join(t.TempDir(), "anchors")
		o := Anchoring{Store: db, Key: key, File: file, Every: time.Hour, Log: slog.New(slog.NewTextHandler(&logtest.Buffer{}, nil))}
		ctx, cancel := context.WithCancel(context.Background())
		closing := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- o.Lead(ctx, closing) }()
		for { // the lead's anchor, written as it starts
			if as, _ := ReadAnchors(file); len(as) == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		appendN(t, db, key, 1) // a write after the lead's anchor
		if stopping {
			close(closing)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Lead: %v", err)
		}
		as := anchorsIn(t, file)
		if as[0].Seq != 1 {
			t.Fatalf("stopping=%v: the lead's anchor is at seq %d, want 1", stopping, as[0].Seq)
		}
		switch {
		case stopping && (len(as) != 2 || as[1].Seq != 2):
			t.Fatalf("a lead that ends with its server: anchors %+v, want the final head (seq 2) anchored", as)
		case !stopping && len(as) != 1:
			t.Fatalf("a lead that is lost: anchors %+v, want none after the lead's (the next leader anchors)", as)
		}
	}
}

// replacedChain is a store whose chain disagrees with the anchor file:
// the file anchors another history (3 entries) under the same key, and
// the store holds a new one of 1 entry.
func replacedChain(t *testing.T) (replaced kv.Store, key ed25519.PrivateKey, file string) {
	t.Helper()
	key = testKey(1)
	file = filepath.Join(t.TempDir(), "anchors")
	old := openStore(t)
	appendN(t, old, key, 3)
	if _, _, err := NewAnchorer(old, key, file, nil, Anchor{}).Anchor(context.Background()); err != nil {
		t.Fatal(err)
	}
	replaced = openStore(t)
	appendN(t, replaced, key, 1)
	return replaced, key, file
}

// TestAnchoringLeadRefusesAChainThatDisagrees: the leader checks the chain
// against the stream's last anchor, whoever wrote it, and anchors nothing
// on a chain that was replaced.
func TestAnchoringLeadRefusesAChainThatDisagrees(t *testing.T) {
	replaced, key, file := replacedChain(t)
	var log logtest.Buffer
	o := Anchoring{Store: replaced, Key: key, File: file, Every: time.Hour, Log: slog.New(slog.NewTextHandler(&log, nil))}
	said := func() bool { return strings.Contains(log.String(), "not anchoring") }
	if err := runUntil(t, func(ctx context.Context) error { return o.Lead(ctx, make(chan struct{})) }, said, nil); err != nil {
		t.Fatalf("Lead: %v", err)
	}
	if as := anchorsIn(t, file); len(as) != 1 || as[0].Seq != 3 {
		t.Fatalf("anchors %+v, want only the old chain's at seq 3", as)
	}
	if got := log.String(); !strings.Contains(got, "not anchoring: the chain disagrees") || !strings.Contains(got, "seq 3") {
		t.Fatalf("log %q, want the refusal said", got)
	}
}

// TestAnchoringWatchSaysADisagreementOnce: every replica's check logs a
// chain that disagrees with the stream, once until it changes.
func TestAnchoringWatchSaysADisagreementOnce(t *testing.T) {
	replaced, key, file := replacedChain(t)
	var log logtest.Buffer
	views := &viewCounter{Store: replaced}
	o := Anchoring{Store: views, Key: key, File: file, Every: time.Millisecond, Log: slog.New(slog.NewTextHandler(&log, nil))}
	// Each check reads the chain once: wait for ten checks of the same
	// replaced chain.
	if err := runUntil(t, o.Watch, func() bool { return views.n.Load() >= 10 }, nil); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if n := strings.Count(log.String(), "disagrees"); n != 1 {
		t.Fatalf("the disagreement was logged %d times, want once:\n%s", n, log.String())
	}
}

// viewCounter counts the read transactions on a store.
type viewCounter struct {
	kv.Store
	n atomic.Int64
}

func (v *viewCounter) View(ctx context.Context, fn func(kv.Tx) error) error {
	v.n.Add(1)
	return v.Store.View(ctx, fn)
}
