package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/discord/discordtest"
)

const (
	discordToken   = "e2e-bot-token"
	discordGuild   = "G1"
	discordDefault = "C100"
	discordOps     = "C200"
)

// discordConfig is a config with Discord on, pointed at fake.
func discordConfig(fake *discordtest.Server, mode string) string {
	return fmt.Sprintf(`
memory:
  slots:
    - name: code_status
      category: code_status
      confirm: true
tools:
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
    approvers: {roles: [member, admin]}
    channels: [ops]
discord:
  mode: %s
  bot_token_env: DISCORD_BOT_TOKEN
  public_key_env: DISCORD_PUBLIC_KEY
  application_id: "APP"
  guild_id: %q
  api_url: %s
  channels: {default: %q, ops: %q}
principals:
  - name: dr_smith
    role: member
    discord: "111"
  - name: oncall
    role: member
    discord_roles: ["555"]
`, mode, discordGuild, fake.APIURL, discordDefault, discordOps)
}

// discordEnv is a server run through run() with Discord on, against a fake.
type discordEnv struct {
	*testEnv
	fake  *discordtest.Server
	key   ed25519.PrivateKey
	agent string // an agent's API key
}

func newDiscordEnv(t *testing.T, mode string) *discordEnv {
	t.Helper()
	return newDiscordEnvConfig(t, mode, func(s string) string { return s })
}

// newDiscordEnvConfig is newDiscordEnv with the config changed by edit.
func newDiscordEnvConfig(t *testing.T, mode string, edit func(string) string) *discordEnv {
	t.Helper()
	fake := discordtest.New(t, discordToken)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, edit(discordConfig(fake, mode)))
	e.env["DISCORD_BOT_TOKEN"] = discordToken
	e.env["DISCORD_PUBLIC_KEY"] = hex.EncodeToString(pub)
	d := &discordEnv{testEnv: e, fake: fake, key: priv}
	d.agent = e.CreateKey("intake_agent", "agent")
	e.Start() // stopped (t.Cleanup) before the fake closes
	return d
}

// posted waits for a message posted to channel whose JSON body contains
// want, and returns its id and the item id its Approve button carries.
func (d *discordEnv) posted(channel, want string) (msgID string, item string) {
	d.t.Helper()
	d.fake.Wait("a message in "+channel+" about "+want, func() bool {
		for _, m := range d.fake.MessagesIn(channel) {
			raw := string(discordtest.Marshal(d.t, m))
			if !strings.Contains(raw, want) {
				continue
			}
			for _, id := range discordButtonIDs(m) {
				if strings.HasPrefix(id, "cs:approve:") {
					// cs:approve:ITEM, or cs:approve:ITEM:VERSION on an editable item
					item, _, _ = strings.Cut(strings.TrimPrefix(id, "cs:approve:"), ":")
					msgID = fmt.Sprint(m["id"])
					return true
				}
			}
		}
		return false
	})
	return msgID, item
}

func discordButtonIDs(m map[string]any) []string {
	var out []string
	rows, _ := m["components"].([]any)
	for _, r := range rows {
		cs, _ := r.(map[string]any)["components"].([]any)
		for _, c := range cs {
			out = append(out, fmt.Sprint(c.(map[string]any)["custom_id"]))
		}
	}
	return out
}

// click signs and posts a click to the server's interactions endpoint.
func (d *discordEnv) click(iid string, who discordtest.Clicker, channel, msgID, custom string) map[string]any {
	d.t.Helper()
	status, resp := discordtest.Post(d.t, d.URL+"/discord/interactions", d.key, time.Now(), discordtest.Marshal(d.t, discordtest.Click(iid, who, channel, msgID, custom)))
	if status != 200 {
		d.t.Fatalf("click %s: status %d %v, want 200", custom, status, resp)
	}
	return resp
}

func discordRespType(r map[string]any) int {
	f, _ := r["type"].(float64)
	return int(f)
}

func discordFlags(r map[string]any) int {
	d, _ := r["data"].(map[string]any)
	f, _ := d["flags"].(float64)
	return int(f)
}

func TestDiscordHTTPModeEndToEnd(t *testing.T) {
	t.Parallel()
	d := newDiscordEnv(t, "http")
	smith := discordtest.Clicker{UserID: "111", GuildID: discordGuild}
	oncall := discordtest.Clicker{UserID: "222", Roles: []string{"555"}, GuildID: discordGuild}
	stranger := discordtest.Clicker{UserID: "999", GuildID: discordGuild}

	// PING, and a bad signature, at the real endpoint.
	status, resp := discordtest.Post(t, d.URL+"/discord/interactions", d.key, time.Now(), []byte(`{"id":"p","type":1}`))
	if status != 200 || discordRespType(resp) != 1 {
		t.Fatalf("PING answered %d %v, want 200 type 1 (PONG)", status, resp)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	if status, _ := discordtest.Post(t, d.URL+"/discord/interactions", other, time.Now(), []byte(`{"id":"p","type":1}`)); status != 401 {
		t.Errorf("a bad signature answered %d, want 401", status)
	}
	if status, _ := discordtest.Post(t, d.URL+"/discord/interactions", d.key, time.Now().Add(-6*time.Minute), []byte(`{"id":"p","type":1}`)); status != 401 {
		t.Errorf("a stale timestamp answered %d, want 401", status)
	}

	// A memory proposal on a confirm slot, and a destructive action request.
	d.MustOK(d.agent, "remember", map[string]any{"user_id": "patient_7", "subject": "code_status", "value": "full code"})
	d.MustOK(d.agent, "remember", map[string]any{"user_id": "patient_7", "subject": "code_status", "value": "DNR @everyone <@123>", "text": "family asked for DNR"})
	req := d.MustOK(d.agent, "confirm_action", map[string]any{"tool": "delete_database", "arguments": map[string]any{"db_name": "orders_prod"}, "dry_run": "drop 41 tables", "summary": "clean up"})
	reqID, _ := req.Data["request_id"].(string)

	memMsg, memItem := d.posted(discordDefault, "code\\\\_status")
	actMsg, actItem := d.posted(discordOps, "delete\\\\_database")
	if !strings.Contains(string(discordtest.Marshal(t, d.fake.Message(memMsg))), "@\u200beveryone") {
		t.Errorf("the injected @everyone is not neutralised (want %q in it): %v", "@\u200beveryone", d.fake.Message(memMsg))
	}
	for _, c := range d.fake.CallsTo("POST", "channels/") {
		if am, _ := c.JSON()["allowed_mentions"].(map[string]any); am == nil || fmt.Sprint(am["parse"]) != "[]" {
			t.Errorf("a post without empty allowed_mentions (want parse []): %s", c.Body)
		}
		if strings.Contains(string(c.Body), "<@123>") {
			t.Errorf("a live mention was posted, want no %q in it: %s", "<@123>", c.Body)
		}
	}

	// An unmapped member is refused privately; the message is unchanged.
	r := d.click("i1", stranger, discordDefault, memMsg, "cs:approve:"+memItem)
	if discordRespType(r) != 4 || discordFlags(r)&64 == 0 {
		t.Errorf("unmapped click answered %v, want a private reply", r)
	}

	// A mapped member approves the proposal by user id.
	r = d.click("i2", smith, discordDefault, memMsg, "cs:approve:"+memItem)
	if discordRespType(r) != 7 || !strings.Contains(fmt.Sprint(r), "Decided by value:dr\\_smith") {
		t.Fatalf("approval answered %v, want the message updated with the decider", r)
	}
	// A re-delivery applies nothing twice.
	r = d.click("i2", smith, discordDefault, memMsg, "cs:approve:"+memItem)
	if discordRespType(r) != 4 {
		t.Errorf("re-delivery answered %v, want a private reply", r)
	}
	// The fake records the PATCH before it stores the edited message:
	// wait for the message as the edit left it (it names the decider),
	// not only for the call.
	d.fake.Wait("the proposal's message to be edited", func() bool {
		return len(d.fake.CallsTo("PATCH", "channels/"+discordDefault+"/messages/"+memMsg)) > 0 &&
			strings.Contains(string(discordtest.Marshal(t, d.fake.Message(memMsg))), "Decided by")
	})
	if r := d.MustOK(d.agent, "pending_changes", map[string]any{"user_id": "patient_7"}); r.Text != "No changes awaiting approval." {
		t.Errorf("pending_changes after the approval: %q, want %q", r.Text, "No changes awaiting approval.")
	}
	if m := d.fake.Message(memMsg); strings.Contains(fmt.Sprint(m["components"]), "cs:approve") {
		t.Errorf("the edited proposal still has buttons: %v, want no cs:approve", m["components"])
	}

	// The on-call role approves the destructive action: Approve opens
	// the second step, privately, and decides nothing; its button does.
	r = d.click("i3", oncall, discordOps, actMsg, "cs:approve:"+actItem)
	if discordRespType(r) != 4 || discordFlags(r)&64 == 0 || !strings.Contains(fmt.Sprint(r), "cs:confirm:"+actItem) || !strings.Contains(fmt.Sprint(r), "cannot be undone") {
		t.Fatalf("a dangerous Approve answered %v, want the private confirmation step", r)
	}
	if st := d.MustOK(d.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("the first step decided: status = %v, want pending: %s", st.Data["status"], st.Raw)
	}
	r = d.click("i3b", oncall, discordOps, actMsg, "cs:confirm:"+actItem)
	if discordRespType(r) != 7 || !strings.Contains(fmt.Sprint(r), "Approved #"+actItem+".") {
		t.Fatalf("the confirmation answered %v, want type 7 saying %q", r, "Approved #"+actItem+".")
	}
	d.fake.Wait("the action's message to be edited", func() bool {
		return len(d.fake.CallsTo("PATCH", "channels/"+discordOps+"/messages/"+actMsg)) > 0
	})
	st := d.MustOK(d.agent, "action_status", map[string]any{"request_id": reqID})
	if st.Data["status"] != "approved" || !strings.Contains(fmt.Sprint(st.Data["confirmed_by"]), "oncall [222]") {
		t.Errorf("action_status after the approval: %s, want approved, confirmed by %q", st.Raw, "oncall [222]")
	}
	if strings.Contains(d.logs.String(), discordToken) {
		t.Errorf("the bot token appears in the logs")
	}
}

func TestDiscordGatewayModeEndToEnd(t *testing.T) {
	t.Parallel()
	d := newDiscordEnv(t, "gateway")
	d.fake.Wait("identify", func() bool { return len(d.fake.Identifies()) == 1 })
	if id := d.fake.Identifies()[0]; id.Token != "Bot "+discordToken {
		t.Errorf("identify token %q, want %q", id.Token, "Bot "+discordToken)
	}
	d.MustOK(d.agent, "remember", map[string]any{"user_id": "patient_7", "subject": "code_status", "value": "full code"})
	d.MustOK(d.agent, "remember", map[string]any{"user_id": "patient_7", "subject": "code_status", "value": "DNR"})
	msg, item := d.posted(discordDefault, "code\\\\_status")
	d.fake.Dispatch(discordtest.Click("g1", discordtest.Clicker{UserID: "111", GuildID: discordGuild}, discordDefault, msg, "cs:approve:"+item))
	d.fake.Wait("the interaction callback", func() bool { return len(d.fake.CallsTo("POST", "interactions/g1/")) == 1 })
	if r := d.fake.CallsTo("POST", "interactions/g1/")[0].JSON(); discordRespType(r) != 7 {
		t.Errorf("callback %v, want type 7", r)
	}
	// The slash command was registered in the guild.
	d.fake.Wait("command registration", func() bool {
		return len(d.fake.CallsTo("POST", "applications/APP/guilds/"+discordGuild+"/commands")) == 1
	})
}

func TestDiscordMissingSecretsStopStartUp(t *testing.T) {
	t.Parallel()
	fake := discordtest.New(t, discordToken)
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"nothing set", map[string]string{}, []string{"DISCORD_BOT_TOKEN", "DISCORD_PUBLIC_KEY"}},
		{"public key not hex", map[string]string{"DISCORD_BOT_TOKEN": "x", "DISCORD_PUBLIC_KEY": "zz"}, []string{"DISCORD_PUBLIC_KEY", "hex Ed25519"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, discordConfig(fake, "http"))
			var errb bytes.Buffer
			err := run(context.Background(), []string{"serve", "--config", e.cfg}, func(k string) string {
				if k == "COUNTERSIGN_DATABASE_URL" {
					return e.env[k] // the store's, when the tests run on PostgreSQL
				}
				return tc.env[k]
			}, strings.NewReader(""), &errb, &errb)
			if err == nil {
				t.Fatal("serve started without the Discord secrets, want it refused")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s, want it named", err, w)
				}
			}
		})
	}
}
