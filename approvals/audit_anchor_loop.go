package approvals

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"time"

	"github.com/countersign/countersign/kv"
)

// Anchoring is the schedule on which a server anchors its chain's head
// outside the store (docs/audit.md, "Anchors"): at start, every Every
// when the head has moved, and at stop. Its loops run until their context
// ends; what fails is logged, never fatal: an anchor is evidence kept
// beside the chain, and a server that cannot write one goes on serving
// (the next start checks the chain against the newest anchor there is).
type Anchoring struct {
	Store kv.Store
	Key   ed25519.PrivateKey
	File  string // the anchor file
	Every time.Duration
	Now   func() time.Time // nil: time.Now
	Log   *slog.Logger
}

// anchor anchors the head once with a, saying what happened and when.
func (o Anchoring) anchor(ctx context.Context, a *Anchorer, when string) {
	if an, wrote, err := a.Anchor(ctx); err != nil {
		o.Log.Error("audit: could not anchor the chain's head", "when", when, "file", o.File, "err", err)
	} else if wrote {
		o.Log.Debug("audit: anchored", "when", when, "seq", an.Seq, "file", o.File)
	}
}

// Single is the schedule of a server that is the only writer of its
// store and of the anchor file (bbolt). last is the newest anchor already
// in the file (CheckAnchorFile). run anchors at start and then every
// Every until ctx ends; final anchors the head once more, to be called
// after every other writer of the store has stopped.
func (o Anchoring) Single(last Anchor) (run func(context.Context) error, final func()) {
	a := NewAnchorer(o.Store, o.Key, o.File, o.Now, last)
	run = func(ctx context.Context) error {
		o.anchor(ctx, a, "start")
		t := time.NewTicker(o.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				o.anchor(ctx, a, "periodic")
			}
		}
	}
	return run, func() { o.anchor(context.Background(), a, "stop") }
}

// Lead is the schedule of the leader of replicas that share one store and
// one anchor stream (File, which every replica mounts): it runs while
// this replica leads, anchoring when it takes the lead and every Every.
// Before each anchor it reads the stream's last anchor, whoever wrote it,
// and checks the chain against it; a chain that disagrees is not
// anchored. When ctx ends because the server stops (closing is closed:
// its calls are done), it anchors the final head while it still leads;
// when leadership is lost, the next leader goes on.
func (o Anchoring) Lead(ctx context.Context, closing <-chan struct{}) error {
	anchor := func(ctx context.Context, when string) {
		last, err := CheckLastAnchor(ctx, o.Store, o.File)
		if err != nil {
			o.Log.Error("audit: not anchoring: the chain disagrees with the cluster's anchor file", "when", when, "file", o.File, "err", err)
			return
		}
		o.anchor(ctx, NewAnchorer(o.Store, o.Key, o.File, o.Now, last), when)
	}
	anchor(ctx, "lead")
	t := time.NewTicker(o.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			select {
			case <-closing:
				actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				anchor(actx, "stop")
				cancel()
			default:
			}
			return nil
		case <-t.C:
			anchor(ctx, "periodic")
		}
	}
}

// Watch is every replica's check, leader or not: every Every it checks
// the chain against the stream's last anchor and logs an error when they
// disagree (once, until what it finds changes). At start a disagreement
// refuses to serve (CheckAnchorFile); this finds one that appears later.
func (o Anchoring) Watch(ctx context.Context) error {
	t := time.NewTicker(o.Every)
	defer t.Stop()
	var said string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		msg := ""
		if _, err := CheckLastAnchor(ctx, o.Store, o.File); err != nil && ctx.Err() == nil {
			msg = err.Error()
		}
		if msg != "" && msg != said {
			o.Log.Error("audit: the chain disagrees with the cluster's anchor file", "file", o.File, "err", msg)
		}
		said = msg
	}
}
