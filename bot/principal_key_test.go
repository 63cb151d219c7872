package bot

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// TestParseScopes: "" and "*" are every space; user_ids are trimmed and
// "*" among them dropped; a list that names nobody, too many user_ids and
// a user_id that is no space are refused with an error of field scopes,
// never widened.
func TestParseScopes(t *testing.T) {
	many := strings.TrimSuffix(strings.Repeat("p,", MaxScopes+1), ",")
	for _, c := range []struct {
		in      string
		want    []string
		refused string
	}{
		{in: "", want: nil},
		{in: "*", want: nil},
		{in: " patient_42 , patient_7,*", want: []string{"patient_42", "patient_7"}},
		{in: ",,", refused: "names no user_id"},
		{in: " ", refused: "names no user_id"},
		{in: many, refused: fmt.Sprintf("at most %d user_ids", MaxScopes)},
		{in: "ok,bad\x00id", refused: "without control characters"},
	} {
		got, err := ParseScopes(c.in)
		if c.refused != "" {
			var e *Error
			if !errors.As(err, &e) || e.Field != "scopes" || e.Kind != KindInvalid || !strings.Contains(e.Msg, c.refused) || got != nil {
				t.Errorf("ParseScopes(%.20q) = %v, %v; want refused: %q", c.in, got, err, c.refused)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseScopes(%.20q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// TestCreateKey: the kind follows the role unless given; the key
// authenticates as the principal; the principal has its own callback
// secret; the audit entry says what was made and, when given, how.
func TestCreateKey(t *testing.T) {
	b := newTestBot(t)
	ctx := context.Background()
	for _, c := range []struct {
		k        NewKey
		wantKind string
		detail   string
	}{
		{NewKey{Name: "ops", Role: policy.RoleAdmin, Via: "cli"}, "person", `"ops" role=admin kind=person scopes= via cli`},
		{NewKey{Name: "ward_bot", Role: policy.RoleAgent, Scopes: []string{"patient_42"}}, "agent", `"ward_bot" role=agent kind=agent scopes=patient_42`},
		{NewKey{Name: "nightly", Role: policy.RoleMember, Kind: "service"}, "service", `"nightly" role=member kind=service scopes=`},
	} {
		var made CreatedKey
		if err := b.Update(ctx, b.SystemCall(b.Now()), func(tx *Tx) error {
			var err error
			made, err = CreateKey(tx, b.Now(), c.k)
			return err
		}); err != nil {
			t.Fatalf("%s: %v", c.k.Name, err)
		}
		if made.Principal.Kind != c.wantKind {
			t.Errorf("%s: kind %q, want %q", c.k.Name, made.Principal.Kind, c.wantKind)
		}
		caller, err := b.Authenticate(ctx, made.Key)
		if err != nil || caller.ID != made.Principal.ID {
			t.Errorf("%s: its key authenticates as %v (%v), want %s", c.k.Name, caller, err, made.Principal.ID)
		}
		var stored []byte
		var entries []approvals.Entry
		if err := b.store.View(ctx, func(tx kv.Tx) error {
			var err error
			if stored, err = b.CallbackSecretOf(tx, made.Principal.ID); err != nil {
				return err
			}
			entries, err = approvals.List(tx, approvals.Filter{Limit: 1})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		shown, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(made.CallbackSecret, "whsec_"))
		if err != nil || string(stored) != string(shown) {
			t.Errorf("%s: the stored callback secret is not the one shown (%v)", c.k.Name, err)
		}
		if len(entries) != 1 || entries[0].Action != "create_principal" || entries[0].Detail != made.Principal.ID+" "+c.detail {
			t.Errorf("%s: the newest audit entry is %+v, want create_principal %q", c.k.Name, entries, c.detail)
		}
	}
}
