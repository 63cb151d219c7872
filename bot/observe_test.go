package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/policy"
)

func TestObserverSeesEveryCall(t *testing.T) {
	b := newTestBot(t)
	type echoArgs struct {
		Space
		N int `json:"n"`
	}
	err := b.Register(Tool{Name: "echo", Capability: policy.CapWrite, Args: echoArgs{}, Handler: func(_ context.Context, c *Call, args any) (Result, error) {
		if args.(*echoArgs).N < 0 {
			return Result{}, errors.New("internal trouble")
		}
		return Result{Text: "ok"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	b.SetObserver(func(ctx context.Context, ev CallEvent) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%s %s %s %s %v", ev.Tool, ev.Capability, ev.Outcome(), ev.Surface(), ev.Duration >= 0 && RequestID(ctx) == "r1"))
	})
	agent := &Caller{Principal: Principal{ID: "p1", Name: "bot", Role: policy.RoleAgent, Scopes: []string{"mine"}}, Surface: "mcp"}
	viewer := &Caller{Principal: Principal{ID: "p2", Name: "v", Role: policy.RoleViewer}, Surface: "slack"}
	ctx := WithRequestID(context.Background(), "r1")
	calls := []struct {
		c    *Caller
		tool string
		args string
	}{
		{agent, "echo", `{"n":1,"user_id":"mine"}`},
		{agent, "echo", `{"n":"x"}`},
		{agent, "echo", `{"n":1,"user_id":"theirs"}`},
		{viewer, "echo", `{"n":1}`},
		{agent, "echo", `{"n":-1,"user_id":"mine"}`},
		{agent, "nope", `{}`},
		{nil, "echo", `{}`},
	}
	for _, c := range calls {
		_, _ = b.Call(ctx, c.c, c.tool, []byte(c.args))
	}
	want := []string{
		"echo write ok mcp true",
		"echo write invalid mcp true",
		"echo write denied mcp true",
		"echo write denied slack true",
		"echo write internal mcp true",
		"  not_found mcp true", // an unknown name is never a label: no tool, no capability
		"echo write unauthenticated none true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("observed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPendingByKindAndOutboxStats(t *testing.T) {
	b := newTestBot(t, "slack")
	src := testSource{status: map[string]string{"a": "pending", "b": "pending", "c": "pending"}}
	b.Items().RegisterKind(KindAction, src)
	b.Items().RegisterKind(KindConsent, src)
	ctx := context.Background()
	err := b.Update(ctx, b.SystemCall(b.Now()), func(tx *Tx) error {
		for _, it := range []struct {
			k   ItemKind
			key string
		}{{KindAction, "a"}, {KindAction, "b"}, {KindConsent, "c"}} {
			if _, err := tx.NewItem(it.k, it.key, Space{}, "", time.Time{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	counts, err := b.Items().PendingByKind(ctx)
	if err != nil || counts[KindAction] != 2 || counts[KindConsent] != 1 {
		t.Fatalf("pending = %v, %v; want 2 of %v and 1 of %v", counts, err, KindAction, KindConsent)
	}
	src.status["a"] = "approved" // decided, even if still indexed as open
	if counts, _ := b.Items().PendingByKind(ctx); counts[KindAction] != 1 {
		t.Fatalf("after a decision: %v, want 1 of %v", counts, KindAction)
	}
	evs, err := b.Outbox().Due(ctx, "slack", b.Now(), 10)
	if err != nil || len(evs) != 3 {
		t.Fatalf("events: %v %v; want 3", evs, err)
	}
	if err := b.Outbox().retry(ctx, evs[0], b.Now().Add(time.Minute), errors.New("slack down")); err != nil {
		t.Fatal(err)
	}
	stats, err := b.Outbox().Stats(ctx)
	if err != nil || stats["slack"] != (OutboxStat{Depth: 3, Retrying: 1, Failures: 1}) {
		t.Fatalf("stats = %+v, %v; want slack %+v", stats, err, OutboxStat{Depth: 3, Retrying: 1, Failures: 1})
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := Secret("cs_sk_very-secret")
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("key", "key", s)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("key", "key", s)
	out := buf.String() + fmt.Sprintf("%v %s %+v %#v", s, s, s, s)
	if strings.Contains(out, "very-secret") || !strings.Contains(out, "[redacted]") {
		t.Fatalf("printed: %s; want %q and no %q in it", out, "[redacted]", "very-secret")
	}
	if s.Reveal() != "cs_sk_very-secret" || Secret("").String() != "" {
		t.Fatalf("Reveal() = %q, Secret(\"\").String() = %q; want %q and \"\"", s.Reveal(), Secret("").String(), "cs_sk_very-secret")
	}
}
