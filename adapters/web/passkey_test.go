package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/countersign/countersign/adapters/postgres"
	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/kv"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// passkeyEngines are the two store engines, each a fresh store.
var passkeyEngines = []struct {
	name string
	open func(t *testing.T) kv.Store
}{
	{"bbolt", func(t *testing.T) kv.Store { return bottest.OpenStore(t) }},
	{"postgres", func(t *testing.T) kv.Store {
		db, err := postgres.Open(context.Background(), pgtest.DSN(t), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}},
}

// TestPasskeyStore: passkeys are kept per principal on both engines (a
// principal whose name extends another's sees none of theirs), listed
// whole for an admin, updated in place, removed once; the user handle is
// made once and kept; a session's ceremony is taken out by the first
// request that finishes it, so the second finds none.
func TestPasskeyStore(t *testing.T) {
	for _, eng := range passkeyEngines {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := context.Background()
			at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
			rec := func(ref, label string, id byte) passkeyRecord {
				return passkeyRecord{Ref: ref, Name: refName(ref), Label: label, Created: at, Credential: webauthn.Credential{ID: []byte{id, 1, 2, 3}, PublicKey: []byte{id}}}
			}
			var h1, h2 []byte
			if err := s.Update(ctx, func(tx kv.Tx) error {
				for _, p := range []passkeyRecord{rec("c:dr_smith", "laptop", 1), rec("c:dr_smith", "phone", 2), rec("c:dr_smithers", "key", 3)} {
					if err := savePasskey(tx, p); err != nil {
						return err
					}
				}
				var err error
				if h1, err = passkeyHandle(tx, "c:dr_smith", true); err != nil {
					return err
				}
				h2, err = passkeyHandle(tx, "c:dr_smith", true)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if len(h1) < 32 || string(h1) != string(h2) {
				t.Fatalf("the user handle: %q then %q, want one handle of at least 32 bytes kept", h1, h2)
			}
			err := s.View(ctx, func(tx kv.Tx) error {
				mine, err := loadPasskeys(tx, "c:dr_smith")
				if err != nil {
					return err
				}
				if len(mine) != 2 || mine[0].Label != "laptop" || mine[1].Label != "phone" {
					t.Errorf("dr_smith's passkeys: got %+v, want laptop and phone", mine)
				}
				all, err := allPasskeys(tx)
				if len(all) != 3 {
					t.Errorf("every passkey: got %d, want 3", len(all))
				}
				if h, err := passkeyHandle(tx, "c:nobody", false); err != nil || h != nil {
					t.Errorf("the handle of a principal without passkeys: %q %v, want none", h, err)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}

			// Used: the counter moves, in place.
			used := rec("c:dr_smith", "laptop", 1)
			used.Credential.Authenticator.SignCount, used.LastUsed = 7, at.Add(time.Minute)
			if err := s.Update(ctx, func(tx kv.Tx) error { return savePasskey(tx, used) }); err != nil {
				t.Fatal(err)
			}
			var mine []passkeyRecord
			_ = s.View(ctx, func(tx kv.Tx) error { mine, err = loadPasskeys(tx, "c:dr_smith"); return err })
			if len(mine) != 2 || mine[0].Credential.Authenticator.SignCount != 7 || !mine[0].LastUsed.Equal(used.LastUsed) {
				t.Fatalf("after a use: got %+v, want laptop's sign count 7", mine)
			}

			// Removed once; another principal's key is not theirs to remove.
			if err := s.Update(ctx, func(tx kv.Tx) error {
				if _, err := removePasskey(tx, "c:dr_smith", []byte{3, 1, 2, 3}); !errors.Is(err, errNoPasskey) {
					t.Errorf("removing dr_smithers's passkey as dr_smith's: %v, want errNoPasskey", err)
				}
				p, err := removePasskey(tx, "c:dr_smith", []byte{1, 1, 2, 3})
				if err != nil || p.Label != "laptop" {
					t.Errorf("removing laptop: %+v %v, want the passkey %q", p, err, "laptop")
				}
				if _, err := removePasskey(tx, "c:dr_smith", []byte{1, 1, 2, 3}); !errors.Is(err, errNoPasskey) {
					t.Errorf("removing it again: %v, want errNoPasskey", err)
				}
				if owner, err := tx.Get(bucketPasskeyIDs, []byte{1, 1, 2, 3}); err != nil || owner != nil {
					t.Errorf("the removed id's owner: %q %v, want none", owner, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}

			// A ceremony is taken once.
			tok := "session-token"
			if err := s.Update(ctx, func(tx kv.Tx) error {
				return putSession(tx, tok, &session{Ref: "c:dr_smith", Expires: at.Add(time.Hour), Ceremony: &ceremony{Purpose: ceremonyStepUp, Item: 4, Expires: at.Add(time.Minute)}})
			}); err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{true, false} {
				var c *ceremony
				if err := s.Update(ctx, func(tx kv.Tx) error {
					var err error
					_, c, err = takeCeremony(tx, tok)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				if got := c != nil && c.Item == 4 && c.Purpose == ceremonyStepUp; got != want {
					t.Errorf("take %d: got ceremony %+v, want one: %v", i+1, c, want)
				}
			}
		})
	}
}

// TestValidatePasskeys: an rp_id is a domain the origins are under; the
// public URL stands for the origins when none are named.
func TestValidatePasskeys(t *testing.T) {
	for _, tt := range []struct {
		name      string
		pk        Passkeys
		publicURL string
		ok        bool
	}{
		{"the host itself", Passkeys{RPID: "countersign.hospital.example", Origins: []string{"https://countersign.hospital.example"}}, "", true},
		{"a parent domain", Passkeys{RPID: "hospital.example"}, "https://countersign.hospital.example", true},
		{"localhost with a port", Passkeys{RPID: "localhost", Origins: []string{"http://localhost:8080"}}, "", true},
		{"no rp_id", Passkeys{}, "", false},
		{"another domain", Passkeys{RPID: "hospital.example", Origins: []string{"https://countersign.example.org"}}, "", false},
		{"a suffix that is not a parent", Passkeys{RPID: "pital.example"}, "https://hospital.example", false},
		{"a path", Passkeys{RPID: "hospital.example", Origins: []string{"https://hospital.example/ui"}}, "", false},
	} {
		err := ValidatePasskeys(&tt.pk, tt.publicURL)
		if (err == nil) != tt.ok {
			t.Errorf("%s: got %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

// TestItemCallerPasskeyForOneItem: a session's passkey step-up makes its
// caller decide that item, and no other, with AuthMethod passkey at the
// moment of the step-up; a later sign-in at the provider is not undone.
func TestItemCallerPasskeyForOneItem(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	oidcAt := at.Add(-time.Minute)
	request := func(pk *passkeyStepUp) *http.Request {
		c := &bot.Caller{Principal: bot.Principal{ID: "web:dr_smith", Name: "dr_smith", Kind: "person"}, Surface: "web", AuthAt: oidcAt, AuthMethod: "oidc", SignIn: "oidc"}
		ctx := context.WithValue(context.Background(), keyCaller, c)
		ctx = context.WithValue(ctx, keySession, &session{Ref: "c:dr_smith", Passkey: pk})
		return httptest.NewRequest("GET", "/ui/items/4", nil).WithContext(ctx)
	}
	for _, tt := range []struct {
		name       string
		pk         *passkeyStepUp
		item       uint64
		wantMethod string
		wantAt     time.Time
	}{
		{"the item stepped up for", &passkeyStepUp{Item: 4, At: at}, 4, "passkey", at},
		{"another item", &passkeyStepUp{Item: 4, At: at}, 5, "oidc", oidcAt},
		{"no passkey step-up", nil, 4, "oidc", oidcAt},
		{"a passkey older than the sign-in", &passkeyStepUp{Item: 4, At: oidcAt.Add(-time.Second)}, 4, "oidc", oidcAt},
	} {
		r := request(tt.pk)
		c := itemCaller(r, tt.item)
		if c.AuthMethod != tt.wantMethod || !c.AuthAt.Equal(tt.wantAt) {
			t.Errorf("%s: got %s at %s, want %s at %s", tt.name, c.AuthMethod, c.AuthAt, tt.wantMethod, tt.wantAt)
		}
		if callerOf(r).AuthMethod != "oidc" {
			t.Errorf("%s: the session's own caller was changed to %s, want %s", tt.name, callerOf(r).AuthMethod, "oidc")
		}
	}
}
