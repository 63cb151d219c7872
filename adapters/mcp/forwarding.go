package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// Forwarding markers: the gateway's record that an approved call is being
// forwarded. One is committed (durably) before the receipt is redeemed and
// the upstream called, and removed once the upstream's answer is audited,
// so a marker that outlives its call means the process stopped in between:
// whether the upstream ran the call is unknown. Each marker names the
// serving run that wrote it (Options.Run): replicas on one database each
// write their own, and a marker is a stopped call's only once its run is
// no longer alive (Options.Alive, the run claims of bot.Runs).
// RecoverForwarding (at start, and in the leader's sweep) audits each
// such request as gateway_outcome_unknown and drops the marker; a live
// run's markers are left alone; nothing is run again (the receipt is
// redeemed once).

// forwardingBucket holds the markers, by request id.
const forwardingBucket = "gateway_forwarding"

// marker is one forwarding in flight.
type marker struct {
	Request   string    `json:"request"`
	Tool      string    `json:"tool"`
	Principal string    `json:"principal"` // the caller's id
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	At        time.Time `json:"at"`
	// Run is the serving run that forwards the call; empty in markers an
	// older binary wrote.
	Run string `json:"run,omitempty"`
}

// AliveFunc reports whether the serving run id still holds its claim
// (bot.Runs' Alive).
type AliveFunc func(ctx context.Context, id string) (bool, error)

// errMarkerChanged says a marker changed between its read and the
// transaction meant to take it over or drop it.
var errMarkerChanged = errors.New("the forwarding marker changed meanwhile")

// mark commits the marker of request id, unless a live one is there
// (another call is forwarding it now): owned says whether this call holds
// it, and so may go on. A marker whose run is no longer alive, or older
// than staleAfter, is a call that stopped: the caller only marks a
// request that has not run (its receipt is not redeemed, so the upstream
// was never called), and the receipt is redeemed once whoever holds the
// marker, so taking over such a marker can never run a call twice.
func (w *waiter) mark(ctx context.Context, caller *bot.Caller, id, tool string) (owned bool, err error) {
	if w.store == nil {
		return true, nil
	}
	m := marker{Request: id, Tool: tool, At: w.now().UTC(), Run: w.runID()}
	if caller != nil {
		m.Principal, m.Name, m.Kind = caller.ID, caller.Name, caller.Kind
	}
	b, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	// The marker is put when none is there, or when the one there is the
	// one judged stopped. That judgement is made outside the transaction
	// (it may ask the database about another session); a marker that
	// changed meanwhile (another call took it, a recovery dropped it) is
	// judged again.
	var judged []byte // the marker there, judged stopped; nil: none
	for range 4 {
		var there []byte // the marker found, when not taken
		taken := false
		err := w.store.Update(ctx, func(tx kv.Tx) error {
			cur, err := tx.Get(forwardingBucket, []byte(id))
			if err != nil {
				return err
			}
			there, taken = nil, false
			switch {
			case cur == nil, judged != nil && bytes.Equal(cur, judged):
				taken = true
				return tx.Put(forwardingBucket, []byte(id), b)
			}
			there = bytes.Clone(cur)
			return nil
		})
		switch {
		case err != nil:
			return false, err
		case taken:
			return true, nil
		case w.live(ctx, there):
			return false, nil // another call is forwarding it now
		}
		judged = there
	}
	return false, nil // contended: other calls keep taking it
}

// runID is this run's id, or "" when none is known.
func (w *waiter) runID() string {
	if w.run == nil {
		return ""
	}
	return w.run()
}

// staleAfter is StaleAfter of the waiter's gateway.
func (w *waiter) staleAfter() time.Duration { return StaleAfter(w.gw) }

// StaleAfter is how old a forwarding marker is once no call can still be
// forwarding under it: gw's call timeout and a minute.
func StaleAfter(gw *gateway.Gateway) time.Duration {
	d := time.Minute
	if gw != nil {
		d += gw.CallTimeout()
	}
	return d
}

// live reports whether the marker v is of a call that may still be
// forwarding: readable, younger than staleAfter, and of this run, of a
// run that is alive, or (an older binary's, naming no run) of any run.
// Should the liveness of its run not be readable, it is live: a caller
// is told to come back, never let run it.
func (w *waiter) live(ctx context.Context, v []byte) bool {
	var m marker
	if json.Unmarshal(v, &m) != nil || w.now().Sub(m.At) >= w.staleAfter() {
		return false
	}
	self := w.runID()
	switch {
	case m.Run == "" || m.Run == self:
		return true
	case w.alive == nil:
		// One process owns the store: another run's marker is a past one's.
		return false
	}
	alive, err := w.alive(ctx, m.Run)
	return err != nil || alive
}

// forwarding reports whether a marker of request id is there, and whether
// it is live (a call is forwarding it now) or stale (the call stopped:
// whether the upstream ran it is unknown).
func (w *waiter) forwarding(ctx context.Context, id string) (found, live bool) {
	if w.store == nil {
		return false, false
	}
	var b []byte
	_ = w.store.View(ctx, func(tx kv.Tx) error {
		v, err := tx.Get(forwardingBucket, []byte(id))
		b = bytes.Clone(v)
		return err
	})
	return b != nil, b != nil && w.live(ctx, b)
}

// ReportFunc records that the outcome of request id is unknown: the audit
// entry detail (gateway_outcome_unknown) under caller, and note on the
// request's cards, in one transaction that first runs drop (which removes
// the marker, or returns an error when another recovery took it first: then
// nothing is to be recorded, and the error is returned as is).
type ReportFunc func(ctx context.Context, caller *bot.Caller, id, detail, note string, drop func(kv.Tx) error) error

// Recovery says whose forwarding markers RecoverForwarding reports.
type Recovery struct {
	// Self is the run that recovers: its own markers are never reported
	// (they are its calls in flight). Empty at start, before it forwards.
	Self string
	// Alive tells whether another run is alive (replicas on one database):
	// only the markers of runs that are not are reported. Nil: one process
	// owns the store, and every marker not of Self is a past run's.
	Alive AliveFunc
	// StaleAfter is how long after it was written a marker naming no run
	// (an older binary's) is reported when Alive is set: by then no call
	// can still be forwarding under it. Zero: at once.
	StaleAfter time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// dead reports whether marker m is of a call that stopped.
func (r Recovery) dead(ctx context.Context, m marker) (bool, error) {
	switch {
	case r.Self != "" && m.Run == r.Self:
		return false, nil
	case r.Alive == nil:
		return true, nil
	case m.Run == "":
		now := time.Now
		if r.Now != nil {
			now = r.Now
		}
		return now().Sub(m.At) >= r.StaleAfter, nil
	}
	alive, err := r.Alive(ctx, m.Run)
	return !alive, err
}

// RecoverForwarding reports every forwarding a run that is no longer alive
// left unfinished (report: gateway_outcome_unknown, under the requester,
// and a note on the request's cards) and drops its marker, in one
// transaction: of two recoveries at once (two replicas starting), one
// reports each marker. Markers of live runs are left alone. It returns how
// many were reported.
func RecoverForwarding(ctx context.Context, store kv.Store, rec Recovery, report ReportFunc) (int, error) {
	type found struct {
		m   marker
		raw []byte
	}
	var all []found
	err := store.View(ctx, func(tx kv.Tx) error {
		all = all[:0]
		return tx.Ascend(forwardingBucket, nil, nil, func(_, v []byte) error {
			var m marker
			if json.Unmarshal(v, &m) == nil && m.Request != "" {
				all = append(all, found{m, bytes.Clone(v)})
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range all {
		m := f.m
		dead, err := rec.dead(ctx, m)
		if err != nil {
			return n, fmt.Errorf("is the run of %s alive: %w", m.Request, err)
		}
		if !dead {
			continue
		}
		caller := &bot.Caller{Principal: bot.Principal{ID: m.Principal, Name: m.Name, Kind: m.Kind}, Surface: "mcp"}
		detail := fmt.Sprintf("%s %s: outcome unknown: Countersign stopped while forwarding this approved call to the upstream (at %s); whether the upstream ran it is unknown. It is not run again: its receipt is redeemed; check the upstream, and ask for a new decision to run it again", m.Request, m.Tool, m.At.Format(time.RFC3339))
		note := fmt.Sprintf("Outcome unknown: Countersign stopped while running this approved call of %s at the upstream, so whether it ran is unknown. It is not run again; check the upstream before anyone asks for it again.", m.Tool)
		drop := func(tx kv.Tx) error {
			cur, err := tx.Get(forwardingBucket, []byte(m.Request))
			if err != nil {
				return err
			}
			if !bytes.Equal(cur, f.raw) {
				return errMarkerChanged // finished, taken over, or reported meanwhile
			}
			return tx.Delete(forwardingBucket, []byte(m.Request))
		}
		err = report(ctx, caller, m.Request, detail, note, drop)
		if errors.Is(err, errMarkerChanged) {
			continue
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Recorded results: the upstream's answer to a forwarded call, kept by
// request id (in the transaction that drops its marker), so that a host
// retrying after the run (with the call's requestState, polling its task,
// or, once, with an identical call: claimReplay) gets the recorded answer,
// never a second execution. PruneResults drops old ones.

// resultsBucket holds them, by request id.
const resultsBucket = "gateway_results"

// recorded is one kept answer.
type recorded struct {
	At     time.Time       `json:"at"`
	Result json.RawMessage `json:"result"`
	// Claimed is set once the answer was given to an identical call made
	// without a requestState (claimReplay): that replay is given once.
	Claimed bool `json:"claimed,omitempty"`
}

// finish drops the marker of request id and keeps res as its answer.
func (w *waiter) finish(ctx context.Context, id string, res json.RawMessage) error {
	if w.store == nil {
		return nil
	}
	var val []byte
	if res != nil {
		val, _ = json.Marshal(recorded{At: w.now().UTC(), Result: res})
	}
	return w.store.Update(context.WithoutCancel(ctx), func(tx kv.Tx) error {
		if err := tx.Delete(forwardingBucket, []byte(id)); err != nil {
			return err
		}
		if val == nil {
			return nil
		}
		return tx.Put(resultsBucket, []byte(id), val)
	})
}

// recordedResult is the kept answer of request id, or nil, and when it
// was recorded.
func (w *waiter) recordedResult(ctx context.Context, id string) (json.RawMessage, time.Time) {
	if w.store == nil {
		return nil, time.Time{}
	}
	var r recorded
	_ = w.store.View(ctx, func(tx kv.Tx) error {
		r = recorded{}
		b, err := tx.Get(resultsBucket, []byte(id))
		if err != nil || b == nil {
			return err
		}
		_ = json.Unmarshal(b, &r)
		return nil
	})
	return r.Result, r.At
}

// claimReplay reports whether the kept answer of request id, which ran,
// is to be given to an identical call of its principal that brings no
// requestState (an older host retrying a call whose answer it lost): once,
// and only within retryWindow of the run. The claim is committed in the
// transaction that reads it, so that of two identical calls at once only
// one gets it. running is true while the run is still being forwarded
// (its marker is there, its answer not yet): the call is told to come back
// for it. Any other identical call is a new call, for a new decision.
func (w *waiter) claimReplay(ctx context.Context, id string) (replay, running bool, err error) {
	if w.store == nil {
		return false, false, nil
	}
	var m []byte // the marker, when no answer is kept yet
	err = w.store.Update(ctx, func(tx kv.Tx) error {
		replay, m = false, nil
		b, err := tx.Get(resultsBucket, []byte(id))
		if err != nil {
			return err
		}
		if b == nil {
			v, err := tx.Get(forwardingBucket, []byte(id))
			m = bytes.Clone(v)
			return err
		}
		var r recorded
		if json.Unmarshal(b, &r) != nil || r.Claimed || r.Result == nil || w.now().Sub(r.At) >= retryWindow {
			return nil
		}
		r.Claimed = true
		val, err := json.Marshal(r)
		if err != nil {
			return err
		}
		replay = true
		return tx.Put(resultsBucket, []byte(id), val)
	})
	if err != nil {
		return false, false, err
	}
	return replay, m != nil && w.live(ctx, m), nil
}

// PruneResults drops the recorded answers kept since before before, and
// returns how many.
func PruneResults(ctx context.Context, store kv.Store, before time.Time) (int, error) {
	var old [][]byte
	err := store.View(ctx, func(tx kv.Tx) error {
		old = old[:0]
		return tx.Ascend(resultsBucket, nil, nil, func(k, v []byte) error {
			var r recorded
			if json.Unmarshal(v, &r) != nil || r.At.Before(before) {
				old = append(old, append([]byte(nil), k...))
			}
			return nil
		})
	})
	if err != nil || len(old) == 0 {
		return 0, err
	}
	err = store.Update(ctx, func(tx kv.Tx) error {
		for _, k := range old {
			if err := tx.Delete(resultsBucket, k); err != nil {
				return err
			}
		}
		return nil
	})
	return len(old), err
}
