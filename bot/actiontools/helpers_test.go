package actiontools

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"github.com/countersign/countersign/bot/bottest"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/kv/kvtest"
	"github.com/countersign/countersign/policy"
)

var start = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

// testTools is the declaration set most tests use: the default config's
// tools plus a quorum-2 tool and one with a richer schema.
func testTools() []ToolSpec {
	return []ToolSpec{
		{Name: "delete_database", Category: "destructive", Schema: map[string]any{"type": "object", "required": []any{"db_name"}},
			Approvers: approvals.Approvers{Roles: []string{"member", "admin"}}, Quorum: 1, Timeout: 30 * time.Minute, Channels: []string{"ops"}},
		{Name: "restart_service", Category: "mutating", Schema: map[string]any{"type": "object", "required": []any{"service"}}, Timeout: 15 * time.Minute},
		{Name: "read_logs", Category: "read-only"},
		{Name: "exec", Category: "mutating", Commands: []CommandSpec{
			{"kubectl get", "read-only", []string{"-n", "-o"}}, {"kubectl describe", "read-only", nil},
			{"kubectl rollout restart", "mutating", nil}, {"kubectl delete", "destructive", nil},
		}},
		{Name: "rollback_production", Category: "destructive", Quorum: 2, Approvers: approvals.Approvers{Roles: []string{"member"}}},
		{Name: "create_server", Category: "mutating", Sensitive: true, Schema: map[string]any{
			"type": "object", "required": []any{"region", "size"},
			"properties": map[string]any{"region": map[string]any{"type": "string"}, "size": map[string]any{"type": "string", "enum": []any{"small", "large"}}},
		}},
		{Name: "isolate_host", Category: "destructive", Approvers: approvals.Approvers{Principals: []string{"secops"}}},
	}
}

type env struct {
	t     *testing.T
	path  string
	key   ed25519.PrivateKey
	clock *bottest.Clock
	db    *bolt.DB
	b     *bot.Bot
	s     *Service
	opts  Options
	// groups are the bot's configured approver groups (groups:), oncall
	// its on-call rotations (oncall:).
	groups policy.Groups
	oncall map[string]policy.Rotation
}

// newEnv opens a bbolt file in a temp dir and registers the service on a
// bot with a fixed clock and one chat sink ("slack").
func newEnv(t *testing.T, o Options) *env {
	t.Helper()
	if o.Tools == nil {
		o.Tools = testTools()
	}
	e := &env{t: t, path: filepath.Join(t.TempDir(), "cs.db"), key: ed25519.NewKeyFromSeed(make([]byte, 32)), clock: bottest.NewClock(start), opts: o}
	e.open()
	return e
}

func (e *env) open() {
	e.t.Helper()
	db, err := bolt.Open(e.path, bolt.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := bot.New(bot.Options{Store: kvtest.Twice(db), SigningKey: e.key, Now: e.clock.Now, Sinks: []string{"slack"}, Groups: e.groups, OnCall: e.oncall})
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := Register(b, e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.db, e.b, e.s = db, b, s
	e.t.Cleanup(func() { db.Close() })
}

// restart closes the store and opens it again with a new bot and service:
// everything in memory is gone.
func (e *env) restart() {
	e.t.Helper()
	if err := e.db.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

// principal creates a principal and returns the caller its key resolves to.
func (e *env) principal(name string, role policy.Role, kind string, scopes ...string) *bot.Caller {
	e.t.Helper()
	var key string
	err := e.b.Update(context.Background(), e.b.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
		_, k, err := bot.CreatePrincipal(tx, e.clock.Now(), name, role, kind, scopes)
		key = k
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := e.b.Authenticate(context.Background(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	c.Surface = "http"
	return c
}

func (e *env) call(c *bot.Caller, tool string, args any) (map[string]any, string, error) {
	e.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.b.Call(context.Background(), c, tool, raw)
	if err != nil {
		return nil, "", err
	}
	return asMap(e.t, res.Data), res.Text, nil
}

// ok calls tool and fails the test on an error.
func (e *env) ok(c *bot.Caller, tool string, args any) (map[string]any, string) {
	e.t.Helper()
	d, text, err := e.call(c, tool, args)
	if err != nil {
		e.t.Fatalf("%s(%v): %v", tool, args, err)
	}
	return d, text
}

// fail calls tool and returns its *bot.Error, failing the test on success.
func (e *env) fail(c *bot.Caller, tool string, args any) *bot.Error {
	e.t.Helper()
	d, text, err := e.call(c, tool, args)
	if err == nil {
		e.t.Fatalf("%s(%v) succeeded: %s %v, want an error", tool, args, text, d)
	}
	var be *bot.Error
	if !errors.As(err, &be) {
		e.t.Fatalf("%s(%v) = %v (%T), want a *bot.Error", tool, args, err, err)
	}
	return be
}

func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// audits returns the audit entries whose action is one of actions, oldest
// first.
func (e *env) audits(actions ...string) []approvals.Entry {
	e.t.Helper()
	var out []approvals.Entry
	err := e.b.View(context.Background(), func(tx kv.Tx) error {
		es, err := approvals.List(tx, approvals.Filter{Limit: 1 << 20})
		for i := len(es) - 1; i >= 0; i-- {
			for _, a := range actions {
				if es[i].Action == a {
					out = append(out, es[i])
				}
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// events returns the queued outbox events of sink of the given type.
func (e *env) events(sink, typ string) []bot.Event {
	e.t.Helper()
	evs, err := e.b.Outbox().Due(context.Background(), sink, start.Add(1000*time.Hour), 10000)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []bot.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) request(id string) *approvals.Request {
	e.t.Helper()
	r, err := e.s.load(context.Background(), id)
	if err != nil || r == nil {
		e.t.Fatalf("load %s = %v, %v, want a request and no error", id, r, err)
	}
	return r
}

// destroyArgs is a complete destructive request.
func destroyArgs(extra map[string]any) map[string]any {
	m := map[string]any{
		"tool":              "delete_database",
		"arguments":         map[string]any{"db_name": "prod"},
		"summary":           "I will delete the prod database. The action is irreversible.",
		"category":          "destructive",
		"requested_effects": []string{"drop database prod"},
		"dry_run":           "DROP DATABASE prod; -- 42 tables, 1.2 GB",
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}
