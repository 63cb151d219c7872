package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
)

// killCycles is how many times TestKill9DuringWrites kills the server.
const killCycles = 32

// unavailableSlack is a Slack API that is always down (503), so every
// outbox event stays queued, retried: an event that disappears was lost.
func unavailableSlack(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(s.Close)
	return s
}

const killConfig = `http:
  rate_per_minute: 100000000
  rate_burst: 10000000
tools:
  - {name: restart_service, category: mutating, timeout: 24h}
slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: %s/api/
  channels: {default: C0123ABCD}
sweep:
  schedule: "@every 1h"
log:
  level: info
`

// acked is what the server acknowledged (a 200), across every cycle.
type acked struct {
	mu       sync.Mutex
	facts    map[uint64][2]string // memory id -> subject, value
	requests map[string]reqAck    // request id -> the last acknowledged state
}

type reqAck struct {
	item   uint64
	status string
}

func (a *acked) pending() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for id, r := range a.requests {
		if r.status == "pending" {
			out = append(out, id)
		}
	}
	return out
}

// TestKill9DuringWrites starts the real binary, drives durable writes,
// approval requests and decisions over HTTP, kills it with SIGKILL at a
// random moment, and checks after every kill that each acknowledged write
// and decision is on disk with its state, that the file is consistent, the
// audit chain verifies, and no outbox event of an acknowledged request was
// lost; then restarts it.
func TestKill9DuringWrites(t *testing.T) {
	t.Parallel()
	slack := unavailableSlack(t)
	c := newChild(t, fmt.Sprintf(killConfig, slack.URL), "SLACK_BOT_TOKEN=xoxb-test", "SLACK_SIGNING_SECRET=test-secret")
	agent := c.key("agent", "agent")
	member := c.key("approver", "member")
	ack := &acked{facts: map[uint64][2]string{}, requests: map[string]reqAck{}}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var total, checks atomic.Int64
	var lastSeq uint64 // the chain's newest entry at the last kill
	for cycle := 0; cycle < killCycles; cycle++ {
		c.start()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		worker := func(fn func(i int) bool) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					if !fn(i) {
						return
					}
				}
			}()
		}
		for w := 0; w < 4; w++ {
			worker(func(i int) bool {
				subject, value := fmt.Sprintf("k%d_%d_%d", cycle, w, i), fmt.Sprintf("v%d", i)
				a, err := c.call(ctx, agent, "remember", map[string]any{"subject": subject, "value": value})
				if err != nil {
					return false
				}
				if a.Status == 200 {
					id := uint64(a.Data["memory_id"].(float64))
					ack.mu.Lock()
					ack.facts[id] = [2]string{subject, value}
					ack.mu.Unlock()
					total.Add(1)
				}
				return true
			})
		}
		for w := 0; w < 2; w++ {
			worker(func(i int) bool {
				a, err := c.call(ctx, agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": fmt.Sprintf("s%d-%d-%d", cycle, w, i)}})
				if err != nil {
					return false
				}
				if a.Status == 200 {
					ack.mu.Lock()
					ack.requests[a.Data["request_id"].(string)] = reqAck{item: uint64(a.Data["item_id"].(float64)), status: a.Data["status"].(string)}
					ack.mu.Unlock()
					total.Add(1)
				}
				return true
			})
		}
		// Read verdicts, audited through the queue: the chain must verify
		// after every kill whatever the moment.
		worker(func(i int) bool {
			a, err := c.call(ctx, agent, "check_before_act", map[string]any{"subject": fmt.Sprintf("k%d_0_%d", cycle, i)})
			if err != nil {
				return false
			}
			if a.Status == 200 {
				checks.Add(1)
			}
			return true
		})
		for w := 0; w < 2; w++ {
			worker(func(i int) bool {
				ids := ack.pending()
				if len(ids) == 0 {
					time.Sleep(time.Millisecond) // nothing to decide yet; not an assertion
					return true
				}
				id := ids[(i*7+w)%len(ids)]
				tool := "approve_action"
				if (i+w)%2 == 1 {
					tool = "deny_action"
				}
				a, err := c.call(ctx, member, tool, map[string]any{"request_id": id, "reason": "kill test"})
				if err != nil {
					return false
				}
				if a.Status == 200 {
					ack.mu.Lock()
					r := ack.requests[id]
					r.status = a.Data["status"].(string)
					ack.requests[id] = r
					ack.mu.Unlock()
					total.Add(1)
				}
				return true
			})
		}
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond) // the random moment of the kill
		c.kill()
		cancel()
		wg.Wait()
		c.checkStore(func(db *bolt.DB) {
			checkAcked(t, db, ack)
			// The first entry this run appended says the last run was
			// killed (the first run followed only `keys create`).
			first, last := chainAfter(t, db, lastSeq)
			if cycle > 0 && (first.Action != "unclean_restart" || !strings.Contains(first.Detail, "did not stop cleanly")) {
				t.Errorf("the first entry after the restart that followed kill %d is %+v, want unclean_restart", cycle, first)
			}
			lastSeq = last
		})
		if t.Failed() {
			t.Fatalf("cycle %d failed\n%s", cycle, c.logs())
		}
	}
	if total.Load() < killCycles {
		t.Fatalf("only %d acknowledged operations in %d cycles: the test did not exercise the server", total.Load(), killCycles)
	}
	t.Logf("%d acknowledged writes and decisions survived %d kills (and %d read verdicts were given)", total.Load(), killCycles, checks.Load())
	c.start() // it still starts after the last kill
}

// checkAcked checks every acknowledged fact, request state and outbox
// event against the file.
func checkAcked(t *testing.T, db *bolt.DB, ack *acked) {
	t.Helper()
	ack.mu.Lock()
	defer ack.mu.Unlock()
	err := db.View(context.Background(), func(tx kv.Tx) error {
		sp := memory.Space{UserID: "default"}
		for id, want := range ack.facts {
			f, err := memory.Load(tx, sp, id)
			if err != nil {
				return err
			}
			if f == nil || f.Subject != want[0] || f.Value != want[1] {
				t.Errorf("acknowledged fact #%d (%s = %s) is %+v after the kill", id, want[0], want[1], f)
			}
		}
		events := map[uint64]map[string]bool{} // item -> event types queued for slack
		err := tx.Ascend("outbox", nil, nil, func(_, v []byte) error {
			var ev struct {
				Sink   string `json:"sink"`
				Type   string `json:"type"`
				ItemID uint64 `json:"item_id"`
			}
			if err := json.Unmarshal(v, &ev); err != nil {
				return err
			}
			if events[ev.ItemID] == nil {
				events[ev.ItemID] = map[string]bool{}
			}
			events[ev.ItemID][ev.Sink+":"+ev.Type] = true
			return nil
		})
		if err != nil {
			return err
		}
		for id, want := range ack.requests {
			r, err := approvals.LoadRequest(tx, id)
			if err != nil {
				return err
			}
			switch {
			case r == nil:
				t.Errorf("acknowledged request %s is missing after the kill", id)
				continue
			case want.status != "pending" && string(r.Status) != want.status:
				t.Errorf("request %s was acknowledged %s, is %s after the kill", id, want.status, r.Status)
			}
			// Slack is down, so a "created" event can only be queued. (A
			// "decided" event of an item not yet posted is consumed as a
			// no-op: the post, when it happens, shows the decided state.)
			if !events[want.item]["slack:created"] {
				t.Errorf("the outbox lost the slack 'created' event of acknowledged request %s (item %d)", id, want.item)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// chainAfter returns the first audit entry after seq (zero if none) and the
// sequence number of the newest.
func chainAfter(t *testing.T, db *bolt.DB, seq uint64) (first approvals.Entry, last uint64) {
	t.Helper()
	err := db.View(context.Background(), func(tx kv.Tx) error {
		if err := tx.Ascend("audit", kv.U64(seq+1), nil, func(k, v []byte) error {
			var err error
			if first, err = approvals.DecodeRow(k, v); err != nil {
				return err
			}
			return kv.ErrStop
		}); err != nil {
			return err
		}
		return tx.Descend("audit", nil, nil, func(k, _ []byte) error {
			last = kv.ParseU64(k)
			return kv.ErrStop
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return first, last
}
