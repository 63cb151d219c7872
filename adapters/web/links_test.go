package web

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/policy"
)

// TestInstallLinks: the bot mints the console's one-time links only for a
// configured person who may sign in: each link verifies under the
// console's key, names that person and lasts as long as its kind says (an
// item's link itemTTL, landing on the item); a step-up link needs single
// sign-on, and the person's own identity there; agents, unknown names and
// nobody get a refusal, never a link.
func TestInstallLinks(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	clock := bottest.NewClock(t0)
	b, err := bot.New(bot.Options{Store: bottest.OpenStore(t), SigningKey: bottest.SigningKey(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	key := LinkKey([]byte("seed-one-0123456789abcdef0123456"))
	people := map[string]Person{
		"dr_lee":  {Principal: bot.Principal{Name: "dr_lee", Role: policy.RoleMember}, Web: "lee@ward7.example"},
		"dr_shah": {Principal: bot.Principal{Name: "dr_shah", Role: policy.RoleMember}},
	}
	o := Options{Bot: b, People: people, LinkKey: key, OIDC: &OIDC{Issuer: "https://idp.invalid", ClientID: "c", ClientSecret: "s"}}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	const base, itemTTL = "https://countersign.example", 2 * time.Hour
	h.InstallLinks(base, itemTTL)
	links := b.WebLinks()
	person := func(name string) *bot.Caller {
		return &bot.Caller{Principal: bot.Principal{ID: "chat:" + name, Name: name, Role: policy.RoleMember, Kind: "person"}}
	}
	token := func(t *testing.T, u, path string) string {
		t.Helper()
		p, err := url.Parse(u)
		if err != nil || !strings.HasPrefix(u, base+path) {
			t.Fatalf("link %q, want it under %s%s", u, base, path)
		}
		return p.Query().Get("t")
	}

	u, err := links.SignIn(person("dr_shah"))
	if err != nil {
		t.Fatalf("a configured person's sign-in link: %v", err)
	}
	c, err := parseLink(key, token(t, u, "/ui/signin/link?"), t0)
	if err != nil || c.Ref != "c:dr_shah" || c.Item != 0 || !c.Expires.Equal(t0.Add(LinkTTL)) {
		t.Fatalf("the sign-in link: %+v %v, want c:dr_shah for %s", c, err, LinkTTL)
	}
	u, err = links.ItemSignIn(person("dr_shah"), 42)
	if err != nil {
		t.Fatalf("an item's link: %v", err)
	}
	c, err = parseLink(key, token(t, u, "/ui/signin/link?"), t0)
	if err != nil || c.Ref != "c:dr_shah" || c.Item != 42 || !c.Expires.Equal(t0.Add(itemTTL)) {
		t.Fatalf("the item's link: %+v %v, want c:dr_shah on item 42 for %s", c, err, itemTTL)
	}
	u, err = links.StepUp(person("dr_lee"), 42)
	if err != nil {
		t.Fatalf("a step-up link for a person with single sign-on: %v", err)
	}
	sc, item, err := parseStepUpLink(key, token(t, u, "/ui/stepup?"), t0)
	if err != nil || sc.Ref != "c:dr_lee" || item != 42 {
		t.Fatalf("the step-up link: %+v #%d %v, want c:dr_lee on item 42", sc, item, err)
	}

	agent := &bot.Caller{Principal: bot.Principal{ID: "k1", Name: "triage-bot", Role: policy.RoleAgent, Kind: "agent"}}
	for _, c := range []struct {
		name string
		mint func() (string, error)
		want string
	}{
		{"nobody", func() (string, error) { return links.SignIn(nil) }, "only people sign in"},
		{"an agent", func() (string, error) { return links.SignIn(agent) }, bot.CheckSignIn(agent.Principal).Message},
		{"an unknown name", func() (string, error) { return links.ItemSignIn(person("dr_who"), 42) }, "dr_who is not under principals: in the config"},
		{"step-up without single sign-on", func() (string, error) { return links.StepUp(person("dr_shah"), 42) }, "dr_shah has no single sign-on identity"},
	} {
		u, err := c.mint()
		if err == nil || u != "" || c.want == "" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q %v, want no link and %q", c.name, u, err, c.want)
		}
	}
}

// TestLinkTarget: the one answer to "whom is a sign-in link for" that the
// web_link tool and `countersign web link` share: a configured person
// first (even when a stored principal has the name), else the one stored
// principal of the name that is not revoked (a name two share names
// neither); a refusal names its kind, never a link for someone who may not
// sign in.
func TestLinkTarget(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	b, err := bot.New(bot.Options{Store: bottest.OpenStore(t), SigningKey: bottest.SigningKey(), Now: bottest.NewClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	err = b.Update(ctx, b.SystemCall(t0), func(tx *bot.Tx) error {
		for _, p := range []struct {
			name, kind string
			role       policy.Role
		}{
			{"dr_out", "person", policy.RoleMember}, {"ward_bot", "agent", policy.RoleMember},
			{"dr_lee", "agent", policy.RoleAgent}, {"gone", "person", policy.RoleMember},
			{"twice", "person", policy.RoleMember}, {"twice", "person", policy.RoleViewer},
		} {
			pr, _, err := bot.CreatePrincipal(tx, t0, p.name, p.role, p.kind, nil)
			if err != nil {
				return err
			}
			ids[p.name] = pr.ID
			if p.name == "gone" {
				pr.Revoked = true
				if err := bot.SavePrincipal(tx, pr); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	people := map[string]Person{
		"dr_lee": {Principal: bot.Principal{Name: "dr_lee", Role: policy.RoleMember}},
		"ci_bot": {Principal: bot.Principal{Name: "ci_bot", Role: policy.RoleAgent}},
	}
	tests := []struct {
		name     string
		store    Viewer
		wantRef  string
		wantKind bot.Kind      // 0 with a ref
		wantBar  bot.SignInBar // for kind conflict
	}{
		{"dr_lee", b, "c:dr_lee", 0, 0}, // the config wins over the stored agent of the name
		{"dr_lee", nil, "c:dr_lee", 0, 0},
		{"dr_out", b, "p:" + ids["dr_out"], 0, 0},
		{"twice", b, "", bot.KindConflict, 0}, // two active principals share the name: neither
		{"ci_bot", b, "", bot.KindConflict, bot.SignInAgentRole},
		{"ward_bot", b, "", bot.KindConflict, bot.SignInNotAPerson},
		{"gone", b, "", bot.KindInvalid, 0},
		{"nobody", b, "", bot.KindInvalid, 0},
		{"dr_out", nil, "", bot.KindInvalid, 0}, // no store to look in
	}
	for _, tc := range tests {
		ref, who, err := LinkTarget(ctx, tc.store, people, tc.name)
		if tc.wantKind == 0 {
			if err != nil || ref != tc.wantRef || who.Name != tc.name || who.Kind != "person" {
				t.Errorf("LinkTarget(%s, store %v) = %q %q/%q %v, want %q for the person %s", tc.name, tc.store != nil, ref, who.Name, who.Kind, err, tc.wantRef, tc.name)
			}
			continue
		}
		if ref != "" || bot.KindOf(err) != tc.wantKind {
			t.Errorf("LinkTarget(%s) = %q, %v (kind %v), want no link and kind %v", tc.name, ref, err, bot.KindOf(err), tc.wantKind)
		}
		if tc.wantBar != 0 && !errors.Is(err, tc.wantBar) {
			t.Errorf("LinkTarget(%s) refused with %v, want the reason %v", tc.name, err, tc.wantBar)
		}
	}
}
