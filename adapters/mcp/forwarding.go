package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// Forwarding markers: the gateway's record that an approved call is being
// forwarded. One is committed (durably) before the receipt is redeemed and
// the upstream called, and removed once the upstream's answer is audited,
// so a marker that outlives its call means the process stopped in between:
// whether the upstream ran the call is unknown. RecoverForwarding, at
// start, audits each such request as gateway_outcome_unknown and drops the
// marker; nothing is run again (the receipt is redeemed once).

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
}

// mark commits the marker of request id, unless a live one is there
// (another call is forwarding it now): owned says whether this call holds
// it, and so may go on. A marker older than staleAfter is a call that
// stopped (a replica that died): the caller only marks a request that has
// not run (its receipt is not redeemed, so the upstream was never
// called), and the receipt is redeemed once whoever holds the marker, so
// taking over a stale marker can never run a call twice.
func (w *waiter) mark(ctx context.Context, caller *bot.Caller, id, tool string) (owned bool, err error) {
	if w.store == nil {
		return true, nil
	}
	m := marker{Request: id, Tool: tool, At: w.now().UTC()}
	if caller != nil {
		m.Principal, m.Name, m.Kind = caller.ID, caller.Name, caller.Kind
	}
	b, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	err = w.store.Update(ctx, func(tx kv.Tx) error {
		prev, err := tx.Get(forwardingBucket, []byte(id))
		if err != nil {
			return err
		}
		if owned = prev == nil || w.stale(prev); !owned {
			return nil
		}
		return tx.Put(forwardingBucket, []byte(id), b)
	})
	return owned && err == nil, err
}

// staleAfter is how old a forwarding marker is once no call can still be
// forwarding under it: the gateway's call timeout and a minute.
func (w *waiter) staleAfter() time.Duration {
	d := time.Minute
	if w.gw != nil {
		d += w.gw.CallTimeout()
	}
	return d
}

// stale reports whether the marker v is older than staleAfter (or
// unreadable).
func (w *waiter) stale(v []byte) bool {
	var m marker
	return json.Unmarshal(v, &m) != nil || w.now().Sub(m.At) >= w.staleAfter()
}

// forwarding reports whether a marker of request id is there, and whether
// it is live (a call is forwarding it now) or stale (the call stopped:
// whether the upstream ran it is unknown).
func (w *waiter) forwarding(ctx context.Context, id string) (found, live bool) {
	if w.store == nil {
		return false, false
	}
	_ = w.store.View(ctx, func(tx kv.Tx) error {
		b, err := tx.Get(forwardingBucket, []byte(id))
		found, live = b != nil, b != nil && !w.stale(b)
		return err
	})
	return found, live
}

// ReportFunc records that the outcome of request id is unknown: the audit
// entry detail (gateway_outcome_unknown) under caller, and note on the
// request's cards.
type ReportFunc func(ctx context.Context, caller *bot.Caller, id, detail, note string) error

// RecoverForwarding reports every forwarding the last run left unfinished
// (report: gateway_outcome_unknown, under the requester, and a note on the
// request's cards) and drops its marker. It returns how many there were.
func RecoverForwarding(ctx context.Context, store kv.Store, report ReportFunc) (int, error) {
	var ms []marker
	err := store.View(ctx, func(tx kv.Tx) error {
		ms = ms[:0]
		return tx.Ascend(forwardingBucket, nil, nil, func(_, v []byte) error {
			var m marker
			if json.Unmarshal(v, &m) == nil && m.Request != "" {
				ms = append(ms, m)
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		caller := &bot.Caller{Principal: bot.Principal{ID: m.Principal, Name: m.Name, Kind: m.Kind}, Surface: "mcp"}
		detail := fmt.Sprintf("%s %s: outcome unknown: Countersign stopped while forwarding this approved call to the upstream (at %s); whether the upstream ran it is unknown. It is not run again: its receipt is redeemed; check the upstream, and ask for a new decision to run it again", m.Request, m.Tool, m.At.Format(time.RFC3339))
		note := fmt.Sprintf("Outcome unknown: Countersign stopped while running this approved call of %s at the upstream, so whether it ran is unknown. It is not run again; check the upstream before anyone asks for it again.", m.Tool)
		if err := report(ctx, caller, m.Request, detail, note); err != nil {
			return 0, err
		}
		id := m.Request
		if err := store.Update(ctx, func(tx kv.Tx) error { return tx.Delete(forwardingBucket, []byte(id)) }); err != nil {
			return 0, err
		}
	}
	return len(ms), nil
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
	err = w.store.Update(ctx, func(tx kv.Tx) error {
		replay, running = false, false
		b, err := tx.Get(resultsBucket, []byte(id))
		if err != nil {
			return err
		}
		if b == nil {
			m, err := tx.Get(forwardingBucket, []byte(id))
			running = m != nil && !w.stale(m)
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
	return replay, running, nil
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
