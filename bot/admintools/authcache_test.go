package admintools

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// cachedEnv is newEnv with the principal cache on.
func cachedEnv(t *testing.T) *env {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "cs.db"), bolt.Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	b, err := bot.New(bot.Options{Store: db, SigningKey: key, CachePrincipals: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := Register(b); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, b: b, db: db, key: key}
}

func TestCachedKeySeesRevocationAtOnce(t *testing.T) {
	e := cachedEnv(t)
	ctx := context.Background()
	admin := caller(policy.RoleAdmin)
	r := e.ok(admin, "create_principal", `{"name":"bot1","role":"agent"}`)
	v := r.Data.(PrincipalView)
	id, key := v.ID, v.Key.Reveal()
	// Cached from here on.
	for range 3 {
		if _, err := e.b.Authenticate(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	// Callers authenticating while the revocation runs: once it has
	// returned, no call authenticates with the key.
	var revoked atomic.Bool
	var after atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				was := revoked.Load()
				if _, err := e.b.Authenticate(ctx, key); err == nil && was {
					after.Add(1)
				}
			}
		}()
	}
	e.ok(admin, "revoke_principal", fmt.Sprintf(`{"principal_id":%q}`, id))
	revoked.Store(true)
	for range 200 {
		if _, err := e.b.Authenticate(ctx, key); bot.KindOf(err) != bot.KindUnauthenticated {
			t.Fatalf("the revoked key still authenticates: %v, want a KindUnauthenticated error", err)
		}
	}
	close(stop)
	wg.Wait()
	if n := after.Load(); n != 0 {
		t.Fatalf("%d authentications succeeded after revoke_principal returned, want 0", n)
	}
}

func TestCachedCallerIsACopy(t *testing.T) {
	e := cachedEnv(t)
	r := e.ok(caller(policy.RoleAdmin), "create_principal", `{"name":"scoped","role":"member","scopes":"p1,p2"}`)
	key := r.Data.(PrincipalView).Key.Reveal()
	c1, err := e.b.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	c1.Scopes[0] = "someone_else"
	c2, err := e.b.Authenticate(context.Background(), key)
	if err != nil || c2.Scopes[0] != "p1" {
		t.Fatalf("a caller's change reached the cache: %v %v; want scopes starting %q", c2.Scopes, err, "p1")
	}
}
