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

func (w *waiter) mark(ctx context.Context, caller *bot.Caller, id, tool string) error {
	if w.store == nil {
		return nil
	}
	m := marker{Request: id, Tool: tool, At: w.now().UTC()}
	if caller != nil {
		m.Principal, m.Name, m.Kind = caller.ID, caller.Name, caller.Kind
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return w.store.Update(ctx, func(tx kv.Tx) error { return tx.Put(forwardingBucket, []byte(id), b) })
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
// retrying with the call's requestState after the run gets the recorded
// answer, never a second execution. PruneResults drops old ones.

// resultsBucket holds them, by request id.
const resultsBucket = "gateway_results"

// recorded is one kept answer.
type recorded struct {
	At     time.Time       `json:"at"`
	Result json.RawMessage `json:"result"`
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

// recordedResult is the kept answer of request id, or nil.
func (w *waiter) recordedResult(ctx context.Context, id string) json.RawMessage {
	if w.store == nil {
		return nil
	}
	var out json.RawMessage
	_ = w.store.View(ctx, func(tx kv.Tx) error {
		out = nil
		b, err := tx.Get(resultsBucket, []byte(id))
		if err != nil || b == nil {
			return err
		}
		var r recorded
		if json.Unmarshal(b, &r) == nil {
			out = r.Result
		}
		return nil
	})
	return out
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
