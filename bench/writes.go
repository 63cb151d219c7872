package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	bbolt "go.etcd.io/bbolt"
)

// benchTools are the declared agent tools of the write and sweep benchmarks:
// mutating, so every confirm_action creates a pending request.
func benchTools(fast time.Duration) []actiontools.ToolSpec {
	return []actiontools.ToolSpec{
		{Name: "restart_service", Category: "mutating", Timeout: 24 * time.Hour},
		{Name: "flush_cache", Category: "mutating", Timeout: fast},
	}
}

// rememberArgs is the i-th fact of a writer: a new subject each time, so
// every write adds a fact (the common case), about 300 bytes of value.
func rememberArgs(w, i int) map[string]any {
	return map[string]any{
		"agent_id": fmt.Sprintf("w%02d", w),
		"subject":  fmt.Sprintf("note_%07d", i),
		"value":    fmt.Sprintf("observation %d of writer %d: blood pressure 120/80, heart rate 72, no acute distress, follow-up in two weeks", i, w),
		"text":     "the nurse recorded it at the bedside",
	}
}

func confirmArgs(w, i int) map[string]any {
	return map[string]any{
		"agent_id":  fmt.Sprintf("w%02d", w),
		"tool":      "restart_service",
		"arguments": map[string]any{"service": fmt.Sprintf("svc-%d-%d", w, i)},
		"summary":   "restart the service to pick up the rotated certificate",
	}
}

// bareReplay writes recorded transactions with a bare bbolt Update loop,
// with the same bbolt options as adapters/bolt: exactly the bytes the tool
// wrote, without Countersign.
type bareReplay struct {
	db  *bbolt.DB
	txs [][]put
	i   int
}

func openBare(path string, txs [][]put) (*bareReplay, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{FreelistType: bbolt.FreelistArrayType}) // adapters/bolt's default: freelist synced
	if err != nil {
		return nil, err
	}
	return &bareReplay{db: db, txs: txs}, nil
}

func (r *bareReplay) next() error {
	puts := r.txs[r.i%len(r.txs)]
	round := r.i / len(r.txs)
	r.i++
	return r.db.Update(func(tx *bbolt.Tx) error {
		for _, p := range puts {
			b, err := tx.CreateBucketIfNotExists([]byte(p.bucket))
			if err != nil {
				return err
			}
			k := p.key
			if round > 0 { // a later pass writes new keys of the same size
				k = append(append([]byte(nil), k...), byte(round))
			}
			if err := b.Put(k, p.value); err != nil {
				return err
			}
		}
		return nil
	})
}

// RunW1 measures one writer: durable remember through the tool, against a
// bare bbolt loop writing the same bytes on the same disk, in alternating
// blocks of block operations (n of each in all).
func RunW1(ctx context.Context, dir string, res *Results, round, n int) error {
	// Record what n remembers write.
	rec := &recordingStore{}
	scratch, err := NewEnv(tempPath(dir, fmt.Sprintf("w1-rec-%d.db", round)), EnvOptions{Wrap: func(s kv.Store) kv.Store { rec.Store = s; return rec }})
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if _, err := scratch.MustCall(ctx, scratch.Agent, "remember", rememberArgs(0, i)); err != nil {
			scratch.Close()
			return err
		}
	}
	scratch.Close()
	env, err := NewEnv(tempPath(dir, fmt.Sprintf("w1-%d.db", round)), EnvOptions{})
	if err != nil {
		return err
	}
	defer env.Close()
	bare, err := openBare(tempPath(dir, fmt.Sprintf("w1-bare-%d.db", round)), rec.txs)
	if err != nil {
		return err
	}
	defer bare.db.Close()
	tool, raw := &Sample{}, &Sample{}
	var toolTime, rawTime time.Duration
	const block = 50
	for done := 0; done < n; done += block {
		t0 := time.Now()
		for i := done; i < min(done+block, n); i++ {
			s := time.Now()
			if _, err := env.MustCall(ctx, env.Agent, "remember", rememberArgs(0, i)); err != nil {
				return err
			}
			tool.Add(time.Since(s))
		}
		t1 := time.Now()
		for i := done; i < min(done+block, n); i++ {
			s := time.Now()
			if err := bare.next(); err != nil {
				return err
			}
			raw.Add(time.Since(s))
		}
		toolTime += t1.Sub(t0)
		rawTime += time.Since(t1)
	}
	res.PutSample("W1.tool", tool)
	res.PutSample("W1.bare", raw)
	res.Put("W1.tool.rate", float64(n)/toolTime.Seconds())
	res.Put("W1.bare.rate", float64(n)/rawTime.Seconds())
	res.Put("W1.ratio", rawTime.Seconds()/toolTime.Seconds())
	res.Put("W1.puts", float64(len(rec.txs[0])))
	return nil
}

// w2Call is the i-th call of W2's writer w: remember and confirm_action,
// half each.
func w2Call(ctx context.Context, env *Env, w, i int, seq *atomic.Int64) error {
	var err error
	if i%2 == 0 {
		_, err = env.MustCall(ctx, env.Agent, "remember", rememberArgs(w, int(seq.Add(1))))
	} else {
		_, err = env.MustCall(ctx, env.Agent, "confirm_action", confirmArgs(w, i))
	}
	return err
}

// RunW2Bare is W2's floor: 64 writers committing, through the same store
// and the same group commit (adapters/bolt with GroupCommit, the options of
// NewEnv), transactions that put exactly the bytes W2's calls put (recorded
// from a scratch run of the same n calls), and nothing else: no tool, no
// reads, no hashing or signing. Its rate is what the disk and the
// committer allow for those bytes.
// It returns the rate.
func RunW2Bare(ctx context.Context, dir string, res *Results, round, n, writers int) (float64, error) {
	rec := &recordingStore{}
	scratch, err := NewEnv(tempPath(dir, fmt.Sprintf("w2-rec-%d.db", round)), EnvOptions{GroupCommit: true, Tools: benchTools(time.Minute),
		Wrap: func(s kv.Store) kv.Store { rec.Store = s; return rec }})
	if err != nil {
		return 0, err
	}
	var seq atomic.Int64
	err = parallel(writers, n, func(w, i int) error { return w2Call(ctx, scratch, w, i, &seq) })
	scratch.Close()
	if err != nil {
		return 0, err
	}
	db, err := bolt.Open(tempPath(dir, fmt.Sprintf("w2-bare-%d.db", round)), bolt.Options{GroupCommit: true, Sequential: append(bot.SequentialBuckets(), memory.SequentialBuckets()...)})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	txs := rec.txs
	bytesPer := 0
	for _, tx := range txs {
		for _, p := range tx {
			bytesPer += len(p.key) + len(p.value)
		}
	}
	lat := make([]Sample, writers)
	t0 := time.Now()
	err = parallel(writers, len(txs), func(w, i int) error {
		s := time.Now()
		err := db.Update(ctx, func(tx kv.Tx) error {
			for _, p := range txs[i] {
				if err := tx.Put(p.bucket, p.key, p.value); err != nil {
					return err
				}
			}
			return nil
		})
		lat[w].Add(time.Since(s))
		return err
	})
	elapsed := time.Since(t0)
	if err != nil {
		return 0, err
	}
	all := &Sample{}
	for i := range lat {
		all.Merge(&lat[i])
	}
	res.PutSample("W2.bare", all)
	res.Put("W2.bare.rate", float64(len(txs))/elapsed.Seconds())
	res.Put("W2.bare.bytes", float64(bytesPer)/float64(len(txs)))
	return float64(len(txs)) / elapsed.Seconds(), nil
}

// RunW2 measures 64 concurrent writers mixing remember and confirm_action
// (half each), durable, with group commit on and, for contrast, off, and
// beside them the bare floor of RunW2Bare; and a lone writer with group
// commit against a plain Update, alternating.
func RunW2(ctx context.Context, dir string, res *Results, round, n, writers int) error {
	var groupRate float64
	for _, gc := range []bool{true, false} {
		env, err := NewEnv(tempPath(dir, fmt.Sprintf("w2-%v-%d.db", gc, round)), EnvOptions{GroupCommit: gc, Tools: benchTools(time.Minute)})
		if err != nil {
			return err
		}
		lat := make([]Sample, writers)
		var seq atomic.Int64
		t0 := time.Now()
		err = parallel(writers, n, func(w, i int) error {
			s := time.Now()
			err := w2Call(ctx, env, w, i, &seq)
			lat[w].Add(time.Since(s))
			return err
		})
		elapsed := time.Since(t0)
		env.Close()
		if err != nil {
			return err
		}
		all := &Sample{}
		for i := range lat {
			all.Merge(&lat[i])
		}
		key := "W2.group"
		if !gc {
			key = "W2.plain"
		}
		res.PutSample(key, all)
		res.Put(key+".rate", float64(n)/elapsed.Seconds())
		if gc {
			groupRate = float64(n) / elapsed.Seconds()
		}
	}
	bare, err := RunW2Bare(ctx, dir, res, round, n, writers)
	if err != nil {
		return err
	}
	res.Put("W2.ratio.bare", groupRate/bare)
	// A lone writer: group commit against a plain Update, alternating.
	g, err := NewEnv(tempPath(dir, fmt.Sprintf("w2-lone-g-%d.db", round)), EnvOptions{GroupCommit: true})
	if err != nil {
		return err
	}
	defer g.Close()
	p, err := NewEnv(tempPath(dir, fmt.Sprintf("w2-lone-p-%d.db", round)), EnvOptions{})
	if err != nil {
		return err
	}
	defer p.Close()
	gs, ps := &Sample{}, &Sample{}
	lone := max(n/20, 100)
	for i := 0; i < lone; i++ {
		s := time.Now()
		if _, err := g.MustCall(ctx, g.Agent, "remember", rememberArgs(0, i)); err != nil {
			return err
		}
		m := time.Now()
		if _, err := p.MustCall(ctx, p.Agent, "remember", rememberArgs(0, i)); err != nil {
			return err
		}
		gs.Add(m.Sub(s))
		ps.Add(time.Since(m))
	}
	res.PutSample("W2.lone.group", gs)
	res.PutSample("W2.lone.plain", ps)
	res.Put("W2.lone.ratio.p50", gs.Quantile(0.5).Seconds()/ps.Quantile(0.5).Seconds())
	return nil
}
