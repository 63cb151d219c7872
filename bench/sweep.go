package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
)

// RunS1 creates n pending action requests through confirm_action (a tenth
// on a tool with a short timeout), then, at a time past that timeout:
// finds the due ones with the deadline index, and applies them with the
// sweeper, recording the longest write transaction.
func RunS1(ctx context.Context, dir string, res *Results, round, n int) error {
	ts := &timedStore{}
	env, err := NewEnv(tempPath(dir, fmt.Sprintf("s1-%d.db", round)), EnvOptions{
		GroupCommit: true, Tools: benchTools(time.Minute),
		Wrap: func(s kv.Store) kv.Store { ts.Store = s; return ts },
	})
	if err != nil {
		return err
	}
	defer env.Close()
	err = parallel(64, n, func(w, i int) error {
		a := confirmArgs(w, i)
		if i%10 == 0 {
			a["tool"] = "flush_cache"
		}
		_, err := env.MustCall(ctx, env.Agent, "confirm_action", a)
		return err
	})
	if err != nil {
		return err
	}
	at := time.Now().Add(2 * time.Minute)
	// Finding: one range scan of the deadline index.
	var due []approvals.DueEntry
	t0 := time.Now()
	err = env.DB.View(ctx, func(tx kv.Tx) error {
		var err error
		due, err = approvals.DueRequests(tx, at, n)
		return err
	})
	find := time.Since(t0)
	if err != nil {
		return err
	}
	if len(due) != n/10 {
		return fmt.Errorf("found %d due requests, want %d", len(due), n/10)
	}
	ts.reset()
	t1 := time.Now()
	changed, err := env.Actions.Sweep(ctx, at)
	apply := time.Since(t1)
	if err != nil {
		return err
	}
	if changed != n/10 {
		return fmt.Errorf("the sweep changed %d requests, want %d", changed, n/10)
	}
	longest, txs := ts.reset()
	res.Put("S1.find.s", find.Seconds())
	res.Put("S1.apply.s", apply.Seconds())
	res.Put("S1.longest_tx.s", longest.Seconds())
	res.Put("S1.txs", float64(txs))
	return nil
}
