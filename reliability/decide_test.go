package reliability

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/kv"
)

const (
	raceRequests = 1000
	raceDeciders = 8
	raceWave     = 25 // requests raced at once
)

// outcome is what one decider was told.
type outcome struct {
	status string // the status it was answered with ("" for a sweep)
	err    error
}

// TestDoubleDecisions races 8 deciders on each of 1,000 approval requests,
// mixing approve and deny through the API (approve_action, deny_action),
// through chat (DecideItem, the path of a button click) and expiry (the
// sweeper, with a clock past the deadline). Each request must end in
// exactly one terminal state with exactly one audit entry for it, and
// every loser must be told the recorded outcome.
func TestDoubleDecisions(t *testing.T) {
	t.Parallel()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "race.db"), bolt.Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := signingKey(t)
	b, svc := newBot(t, db, key, actiontools.Options{Tools: []actiontools.ToolSpec{{Name: "restart_service", Category: "mutating", Timeout: time.Hour}}})
	ctx := context.Background()
	later := time.Now().Add(2 * time.Hour) // the sweeper's clock: past every deadline

	type req struct {
		id   string
		item uint64
	}
	told := make(map[string][]outcome, raceRequests)
	var mu sync.Mutex
	for wave := 0; wave < raceRequests/raceWave; wave++ {
		reqs := make([]req, raceWave)
		for i := range reqs {
			res, err := b.Call(ctx, agentCaller, "confirm_action", fmt.Appendf(nil, `{"tool":"restart_service","arguments":{"service":"s%d-%d"}}`, wave, i))
			if err != nil {
				t.Fatal(err)
			}
			d := data(t, res)
			reqs[i] = req{id: d["request_id"].(string), item: uint64(d["item_id"].(float64))}
		}
		var wg sync.WaitGroup
		for i, r := range reqs {
			for d := 0; d < raceDeciders; d++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var o outcome
					var res bot.Result
					approve := (i+d)%2 == 0
					switch d % 4 {
					case 0, 1: // the API
						tool := "deny_action"
						if approve {
							tool = "approve_action"
						}
						res, o.err = b.Call(ctx, memberCaller, tool, fmt.Appendf(nil, `{"request_id":%q,"reason":"race"}`, r.id))
					case 2: // chat: a button click
						res, o.err = b.DecideItem(ctx, memberCaller, r.item, approve, "race", nil)
					case 3: // the sweeper, past the deadline
						if d == 3 && i%3 == 0 {
							_, o.err = svc.Sweep(ctx, later)
							mu.Lock()
							told[r.id] = append(told[r.id], o)
							mu.Unlock()
							return
						}
						res, o.err = b.DecideItem(ctx, memberCaller, r.item, !approve, "race", nil)
					}
					if o.err == nil {
						o.status, _ = data(t, res)["status"].(string)
					}
					mu.Lock()
					told[r.id] = append(told[r.id], o)
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
	}
	// Whatever is still pending (no decider won) is expired now, so that
	// every request has its outcome.
	if _, err := svc.Sweep(ctx, later); err != nil {
		t.Fatal(err)
	}

	audits := map[string]int{}
	_ = db.View(ctx, func(tx kv.Tx) error {
		return tx.Ascend("audit", nil, nil, func(k, v []byte) error {
			e, err := approvals.DecodeRow(k, v)
			if err != nil {
				return err
			}
			switch e.Action {
			case "action_approved", "action_denied", "action_expired":
				id, _, _ := strings.Cut(e.Detail, " ")
				audits[strings.TrimSuffix(id, ":")]++
			}
			return nil
		})
	})
	if len(told) != raceRequests {
		t.Fatalf("%d requests raced, want %d", len(told), raceRequests)
	}
	for id, outs := range told {
		var r *approvals.Request
		_ = db.View(ctx, func(tx kv.Tx) error { r, _ = approvals.LoadRequest(tx, id); return nil })
		if r == nil {
			t.Fatalf("request %s vanished", id)
		}
		final := string(r.Status)
		switch final {
		case "approved", "denied", "expired":
		default:
			t.Errorf("%s ended %s, want a terminal state", id, final)
		}
		if audits[id] != 1 {
			t.Errorf("%s (%s) has %d decision entries in the audit chain, want exactly 1", id, final, audits[id])
		}
		for _, o := range outs {
			switch {
			case o.err == nil && o.status == "":
				// a sweep: it answers with a count, not a status
			case o.err == nil:
				if o.status != final {
					t.Errorf("%s: a decider was answered %q, want the recorded outcome %q", id, o.status, final)
				}
			default:
				var be *bot.Error
				if !errors.As(o.err, &be) || be.Kind != bot.KindConflict {
					t.Errorf("%s: a loser got %v, want a conflict naming the recorded outcome", id, o.err)
					continue
				}
				if got, _ := be.Data.(map[string]any)["status"].(string); got != final {
					t.Errorf("%s: a loser was told %q, want the recorded outcome %q", id, got, final)
				}
			}
		}
	}
	rep, err := approvals.Verify(ctx, db, key.Public().(ed25519.PublicKey))
	if err != nil || !rep.Intact {
		t.Fatalf("audit chain = %+v, %v; want intact", rep, err)
	}
}

// data returns a result's structured data as a map.
func data(t *testing.T, r bot.Result) map[string]any {
	t.Helper()
	b, err := json.Marshal(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
