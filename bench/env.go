package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/bot/memorytools"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// EnvOptions configure an in-process Countersign.
type EnvOptions struct {
	GroupCommit bool
	// Wrap, when set, wraps the store the bot writes through (timing).
	Wrap func(kv.Store) kv.Store
	// Tools are the declared agent tools (confirm_action).
	Tools []actiontools.ToolSpec
}

// Env is a bot with the memory and action tools on a bbolt file: the same
// wiring as `countersign serve`, without the HTTP edge.
type Env struct {
	Path    string
	DB      *bolt.DB
	Store   kv.Store
	Bot     *bot.Bot
	Actions *actiontools.Service
	Agent   *bot.Caller // role agent: remember, check_before_act, confirm_action
	Member  *bot.Caller // role member: decides
}

// slots mirror the declared slots of the default config.yaml.
var slots = []memory.Slot{
	{Name: "active_medication", Category: "active_medication", Verbatim: true, Multi: true, Confirm: true, Aliases: []string{"meds"}},
	{Name: "allergy", Category: "allergy", Verbatim: true, Multi: true, Aliases: []string{"allergies"}},
	{Name: "code_status", Category: "code_status", Confirm: true},
}

// NewEnv opens (creating) the store at path and wires the tools.
func NewEnv(path string, o EnvOptions) (*Env, error) {
	// The options serve opens a bbolt store with (config's
	// StoreConfig.BoltOptions), group commit as asked.
	db, err := bolt.Open(path, bolt.Options{GroupCommit: o.GroupCommit, Sequential: append(bot.SequentialBuckets(), memory.SequentialBuckets()...)})
	if err != nil {
		return nil, err
	}
	var store kv.Store = db
	if o.Wrap != nil {
		store = o.Wrap(db)
	}
	seed, err := signingSeed(path)
	if err != nil {
		db.Close()
		return nil, err
	}
	b, err := bot.New(bot.Options{Store: store, SigningKey: ed25519.NewKeyFromSeed(seed), Logger: slog.New(slog.DiscardHandler),
		// The workloads keep thousands of requests of one agent awaiting a
		// decision on purpose (a queue at scale): no per-requester cap.
		MaxOpenItems: -1})
	if err != nil {
		db.Close()
		return nil, err
	}
	schema, err := memory.NewSchema(slots)
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := memorytools.Register(b, memory.Options{
		Schema: schema, CriticalCategories: []string{"allergy", "active_medication"},
		CriticalBudget: 200, RecallContext: 40, TrustedSources: []string{"fhir"},
	}); err != nil {
		db.Close()
		return nil, err
	}
	svc, err := actiontools.Register(b, actiontools.Options{Tools: o.Tools, DefaultTimeout: 30 * time.Minute})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Env{
		Path: path, DB: db, Store: store, Bot: b, Actions: svc,
		Agent:  &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "bench-agent", Role: policy.RoleAgent, Kind: "agent"}, Surface: "http"},
		Member: &bot.Caller{Principal: bot.Principal{ID: "prin_member", Name: "bench-member", Role: policy.RoleMember, Kind: "person"}, Surface: "http"},
	}, nil
}

// Close closes the store.
func (e *Env) Close() error { return e.DB.Close() }

// Call runs a tool as caller with args marshalled to JSON.
func (e *Env) Call(ctx context.Context, caller *bot.Caller, tool string, args any) (bot.Result, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return bot.Result{}, err
	}
	return e.Bot.Call(ctx, caller, tool, raw)
}

// MustCall is Call that turns an error into a panic-free error with the tool name.
func (e *Env) MustCall(ctx context.Context, caller *bot.Caller, tool string, args any) (bot.Result, error) {
	r, err := e.Call(ctx, caller, tool, args)
	if err != nil {
		return r, fmt.Errorf("%s: %w", tool, err)
	}
	return r, nil
}

// parallel runs n workers; each calls fn(worker, i) for its share of
// total operations, and returns the first error.
func parallel(n, total int, fn func(w, i int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int, 1024)
	go func() {
		for i := 0; i < total; i++ {
			next <- i
		}
		close(next)
	}()
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(w, i); err != nil {
					once.Do(func() { first = err })
					for range next {
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// timedStore records how long each Update takes, from call to durable
// return (with nothing else writing, how long the write lock is held).
type timedStore struct {
	kv.Store
	mu      sync.Mutex
	longest time.Duration
	count   int
}

func (s *timedStore) Update(ctx context.Context, fn func(kv.Tx) error) error {
	t0 := time.Now()
	err := s.Store.Update(ctx, fn)
	d := time.Since(t0)
	s.mu.Lock()
	s.count++
	s.longest = max(s.longest, d)
	s.mu.Unlock()
	return err
}

func (s *timedStore) reset() (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, c := s.longest, s.count
	s.longest, s.count = 0, 0
	return l, c
}

// put is one recorded write.
type put struct {
	bucket     string
	key, value []byte
}

// recordingStore records the puts of every committed Update, so that a
// bare bbolt loop can write exactly the same bytes.
type recordingStore struct {
	kv.Store
	mu  sync.Mutex
	txs [][]put
}

type recordingTx struct {
	kv.Tx
	puts *[]put
}

func (t recordingTx) Put(bucket string, k, v []byte) error {
	*t.puts = append(*t.puts, put{bucket, append([]byte(nil), k...), append([]byte(nil), v...)})
	return t.Tx.Put(bucket, k, v)
}

func (s *recordingStore) Update(ctx context.Context, fn func(kv.Tx) error) error {
	var puts []put
	err := s.Store.Update(ctx, func(tx kv.Tx) error {
		puts = puts[:0]
		return fn(recordingTx{Tx: tx, puts: &puts})
	})
	if err == nil {
		s.mu.Lock()
		s.txs = append(s.txs, puts)
		s.mu.Unlock()
	}
	return err
}

func tempPath(dir, name string) string { return filepath.Join(dir, name) }

// signingSeed returns the audit signing key's seed of the store at path,
// from path.sign.key (the server's default key file), creating the file
// on first use: every Env on one store and the server started on it later
// sign one chain with one key, as the server requires.
func signingSeed(path string) ([]byte, error) {
	keyPath := path + ".sign.key"
	if b, err := os.ReadFile(keyPath); err == nil {
		seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("%s: not a hex Ed25519 seed", keyPath)
		}
		return seed, nil
	}
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	return seed, os.WriteFile(keyPath, []byte(hex.EncodeToString(seed)+"\n"), 0o600)
}
