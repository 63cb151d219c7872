package web

import (
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
		{"an agent", func() (string, error) { return links.SignIn(agent) }, bot.SignInRefusal(agent.Principal)},
		{"an unknown name", func() (string, error) { return links.ItemSignIn(person("dr_who"), 42) }, "dr_who is not under principals: in the config"},
		{"step-up without single sign-on", func() (string, error) { return links.StepUp(person("dr_shah"), 42) }, "dr_shah has no single sign-on identity"},
	} {
		u, err := c.mint()
		if err == nil || u != "" || c.want == "" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q %v, want no link and %q", c.name, u, err, c.want)
		}
	}
}
