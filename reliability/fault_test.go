package reliability

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/bot/memorytools"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

var (
	agentCaller  = &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "agent", Role: policy.RoleAgent, Kind: "agent"}, Surface: "http"}
	memberCaller = &bot.Caller{Principal: bot.Principal{ID: "prin_member", Name: "member", Role: policy.RoleMember, Kind: "person"}, Surface: "http"}
)

// newBot wires the memory and action tools on a store, as serve does.
func newBot(t *testing.T, db *bolt.DB, key ed25519.PrivateKey, o actiontools.Options) (*bot.Bot, *actiontools.Service) {
	t.Helper()
	b, err := bot.New(bot.Options{Store: db, SigningKey: key, Sinks: []string{"slack"}})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := memory.NewSchema([]memory.Slot{{Name: "allergy", Category: "allergy", Multi: true, Verbatim: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := memorytools.Register(b, memory.Options{Schema: schema, CriticalCategories: []string{"allergy"}}); err != nil {
		t.Fatal(err)
	}
	svc, err := actiontools.Register(b, o)
	if err != nil {
		t.Fatal(err)
	}
	return b, svc
}

func signingKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestFailedSyncAcknowledgesNothing injects a failed fsync under the tools:
// the call fails with an internal error (never a success), nothing of it is
// committed, the store refuses everything after it (and says why), and a
// reopened store is consistent, with the audit chain intact and every
// earlier acknowledged write present.
func TestFailedSyncAcknowledgesNothing(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group_commit=%v", group), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cs.db")
			var fail atomic.Bool
			db, err := bolt.Open(path, bolt.Options{GroupCommit: group, FailSync: func() error {
				if fail.Load() {
					return errors.New("fdatasync: input/output error")
				}
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			key := signingKey(t)
			b, _ := newBot(t, db, key, actiontools.Options{Tools: []actiontools.ToolSpec{{Name: "restart_service", Category: "mutating"}}})
			ctx := context.Background()
			call := func(tool, args string) (bot.Result, error) {
				return b.Call(ctx, agentCaller, tool, []byte(args))
			}
			if _, err := call("remember", `{"subject":"allergy","value":"penicillin"}`); err != nil {
				t.Fatal(err)
			}
			fail.Store(true)
			for _, c := range []struct{ tool, args string }{
				{"remember", `{"subject":"allergy","value":"latex"}`},
				{"confirm_action", `{"tool":"restart_service","arguments":{"service":"api"}}`},
				{"check_before_act", `{"subject":"allergy"}`},
			} {
				res, err := call(c.tool, c.args)
				if err == nil {
					t.Fatalf("%s succeeded after a failed sync: %s, want an error", c.tool, res.Text)
				}
				var be *bot.Error
				if errors.As(err, &be) && be.Kind != bot.KindInternal {
					t.Errorf("%s: a storage fault answered as %v (%v), want an internal error", c.tool, be.Kind, err)
				}
			}
			fail.Store(false)
			if _, err := call("remember", `{"subject":"allergy","value":"aspirin"}`); !errors.Is(err, bolt.ErrFailed) {
				t.Errorf("a write after the fault: %v, want the store's failure", err)
			}
			if err := db.Err(); !errors.Is(err, bolt.ErrFailed) {
				t.Errorf("Err() = %v, want bolt.ErrFailed", err)
			}
			db.Close()

			db, err = bolt.Open(path, bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Check(); err != nil {
				t.Fatal(err)
			}
			rep, err := approvals.Verify(ctx, db, key.Public().(ed25519.PublicKey))
			if err != nil || !rep.Intact {
				t.Fatalf("audit chain after the fault = %+v, %v; want intact", rep, err)
			}
			var values []string
			_ = db.View(ctx, func(tx kv.Tx) error {
				facts, err := memory.Live(tx, memory.Space{UserID: "default"}, "allergy")
				for _, f := range facts {
					values = append(values, f.Value)
				}
				return err
			})
			if fmt.Sprint(values) != "[penicillin]" {
				t.Errorf("after reopening the store holds %v, want only the acknowledged [penicillin]", values)
			}
			// The reopened store works again.
			b2, _ := newBot(t, db, key, actiontools.Options{})
			if _, err := b2.Call(ctx, agentCaller, "remember", []byte(`{"subject":"allergy","value":"latex"}`)); err != nil {
				t.Fatalf("a write after reopening: %v", err)
			}
		})
	}
}

const diskConfig = `http:
  rate_per_minute: 100000000
  rate_burst: 10000000
sweep:
  schedule: "@every 1h"
`

// TestFullDiskStopsCleanly runs the real binary with a file-size limit
// (ulimit -f: writes past it fail with EFBIG, as on a full disk) and writes
// until the store cannot grow. Every call answers (a 5xx once the disk is
// full, never an acknowledgement of a write that is not on disk), /readyz
// then reports not ready, and after a restart without the limit every
// acknowledged fact is there, the file is consistent and the audit chain
// verifies.
func TestFullDiskStopsCleanly(t *testing.T) {
	t.Parallel()
	c := newChild(t, diskConfig)
	agent := c.key("agent", "agent")
	c.start() // create the file and the signing key at their initial size
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(c.db)
	if err != nil {
		t.Fatal(err)
	}
	// Room for the file to grow a little, in the shell's 512-byte blocks.
	c.prefix = fmt.Sprintf("ulimit -f %d", st.Size()/512+2048)
	c.start()
	acked := map[uint64]string{}
	failed := 0
	for i := 0; i < 400; i++ {
		value := fmt.Sprintf("%04d %s", i, string(bytesOf('x', 3900)))
		a, err := c.call(context.Background(), agent, "remember", map[string]any{"subject": fmt.Sprintf("blob_%d", i), "value": value})
		if err != nil {
			t.Fatalf("write %d: the server did not answer (%v)\n%s", i, err, c.logs())
		}
		switch {
		case a.Status == 200:
			if failed > 0 {
				t.Fatalf("write %d acknowledged after the store failed: %s", i, a.Raw)
			}
			acked[uint64(a.Data["memory_id"].(float64))] = value
		case a.Status >= 500:
			failed++
		default:
			t.Fatalf("write %d: status %d, want 200 or a 5xx: %s", i, a.Status, a.Raw)
		}
		if failed >= 3 {
			break
		}
	}
	if failed == 0 {
		t.Fatalf("the file-size limit never stopped a write (%d acknowledged)", len(acked))
	}
	resp, err := c.client.Get(c.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Errorf("/readyz answers 200 after the store failed, want an error status")
	}
	_ = c.stop() // a failed store may make serve exit non-zero; it must exit
	c.prefix = ""
	c.checkStore(func(db *bolt.DB) {
		_ = db.View(context.Background(), func(tx kv.Tx) error {
			for id, v := range acked {
				f, err := memory.Load(tx, memory.Space{UserID: "default"}, id)
				if err != nil || f == nil || f.Value != v {
					t.Errorf("acknowledged fact #%d is %v after the disk filled (%v), want the acknowledged value", id, f, err)
				}
			}
			return nil
		})
	})
	c.start()
	c.mustCall(agent, "remember", map[string]any{"subject": "after", "value": "the disk has room again"})
	t.Logf("%d writes acknowledged before the disk filled; %d refused", len(acked), failed)
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}
