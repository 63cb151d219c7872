package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
)

// recallQuestion is asked of every space: it matches some facts by word.
const recallQuestion = "what is the blood pressure and heart rate at follow-up"

// BigSpace is R1's first set-up: one space of n facts.
type BigSpace struct {
	env *Env
	sp  memory.Space
}

// NewBigSpace fills user "big" with n facts through remember.
func NewBigSpace(ctx context.Context, dir string, n int) (*BigSpace, error) {
	env, err := NewEnv(tempPath(dir, "r1-space.db"), EnvOptions{GroupCommit: true})
	if err != nil {
		return nil, err
	}
	err = parallel(64, n, func(w, i int) error {
		a := rememberArgs(0, i)
		a["user_id"] = "big"
		delete(a, "agent_id")
		if i%3 == 0 {
			a["value"] = fmt.Sprintf("dose %d mg at night; tolerates it well", i)
		}
		_, err := env.MustCall(ctx, env.Agent, "remember", a)
		return err
	})
	if err != nil {
		env.Close()
		return nil, err
	}
	return &BigSpace{env: env, sp: memory.Space{UserID: "big"}}, nil
}

// Close closes the store.
func (s *BigSpace) Close() error { return s.env.Close() }

// Run measures n recalls: the tool (durable: the read is audited) and the
// ranking alone in a read transaction, alternating.
func (s *BigSpace) Run(ctx context.Context, res *Results, key string, n int) error {
	return runRecalls(ctx, s.env, res, key, n, func(int) memory.Space { return s.sp })
}

func runRecalls(ctx context.Context, env *Env, res *Results, key string, n int, space func(i int) memory.Space) error {
	call, read := &Sample{}, &Sample{}
	req := memory.RecallRequest{Question: recallQuestion, Critical: map[string]bool{"allergy": true, "active_medication": true}, Context: 40, Budget: 200}
	for i := 0; i < n; i++ {
		sp := space(i)
		t0 := time.Now()
		var got memory.Recall
		err := env.DB.View(ctx, func(tx kv.Tx) error {
			var err error
			got, err = memory.RecallSpace(tx, sp, req)
			return err
		})
		if err != nil {
			return err
		}
		t1 := time.Now()
		if len(got.Facts) == 0 {
			return fmt.Errorf("recall in %s found nothing", sp)
		}
		if _, err := env.MustCall(ctx, env.Agent, "recall", map[string]any{"user_id": sp.UserID, "agent_id": sp.AgentID, "question": recallQuestion}); err != nil {
			return err
		}
		read.Add(t1.Sub(t0))
		call.Add(time.Since(t1))
	}
	res.PutSample(key+".read", read)
	res.PutSample(key+".call", call)
	return nil
}

// Million is R1's second set-up and M1's: agents × perAgent facts, each
// agent its own space (user default, agent_id a<n>), written through
// remember by 64 writers with group commit.
type Million struct {
	Path     string
	Agents   int
	PerAgent int
	Load     time.Duration
}

// BuildMillion writes the data set and reports the load.
func BuildMillion(ctx context.Context, dir string, agents, perAgent int, res *Results) (*Million, error) {
	m := &Million{Path: tempPath(dir, "m1.db"), Agents: agents, PerAgent: perAgent}
	env, err := NewEnv(m.Path, EnvOptions{GroupCommit: true})
	if err != nil {
		return nil, err
	}
	total := agents * perAgent
	t0 := time.Now()
	// Interleave agents, as facts arrive in practice.
	err = parallel(64, total, func(w, i int) error {
		agent, k := i%agents, i/agents
		a := rememberArgs(0, k)
		a["agent_id"] = fmt.Sprintf("a%05d", agent)
		_, err := env.MustCall(ctx, env.Agent, "remember", a)
		return err
	})
	m.Load = time.Since(t0)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.Put("M1.load.s", m.Load.Seconds())
	res.Put("M1.load.rate", float64(total)/m.Load.Seconds())
	res.Put("M1.load.heapsys.MiB", float64(ms.HeapSys)/(1<<20))
	if cerr := env.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(m.Path)
	if err != nil {
		return nil, err
	}
	res.Put("M1.file.MiB", float64(st.Size())/(1<<20))
	// The same file after `countersign store compact` (M3's operation):
	// what a fact costs once its free pages are given back.
	rep, err := bolt.Compact(m.Path, time.Second)
	if err != nil {
		return nil, err
	}
	res.Put("M1.compact.MiB", float64(rep.After)/(1<<20))
	res.Put("M1.compact.s", rep.Took.Seconds())
	return m, nil
}

// Run opens the data set (timing the open), recalls random agents' facts
// n times, and checks the store.
func (m *Million) Run(ctx context.Context, res *Results, n int, check bool) error {
	t0 := time.Now()
	db, err := bolt.Open(m.Path, bolt.Options{})
	if err != nil {
		return err
	}
	res.Put("M1.open.s", time.Since(t0).Seconds())
	db.Close()
	env, err := NewEnv(m.Path, EnvOptions{GroupCommit: true})
	if err != nil {
		return err
	}
	defer env.Close()
	r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	if err := runRecalls(ctx, env, res, "R1.agent", n, func(int) memory.Space {
		return memory.Space{UserID: "default", AgentID: fmt.Sprintf("a%05d", r.IntN(m.Agents))}
	}); err != nil {
		return err
	}
	if check {
		t1 := time.Now()
		if err := env.DB.Check(); err != nil {
			return fmt.Errorf("consistency check of the 1M file: %w", err)
		}
		res.Put("M1.check.s", time.Since(t1).Seconds())
	}
	return nil
}
