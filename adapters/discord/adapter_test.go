package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/discord/discordtest"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// memoryChange and action are the two kinds of item the tests post most.
func memoryChange() testState {
	return testState{
		Title: "REPLACE active_medication: 'warfarin 5mg daily' -> 'apixaban 5mg twice daily'",
		Fields: []bot.Field{
			{Label: "Current", Value: "warfarin 5mg daily"},
			{Label: "Proposed", Value: "apixaban 5mg twice daily"},
			{Label: "Said", Value: "Switch her to apixaban 5mg twice daily."},
		},
		ExpiresAt: t0.Add(168 * time.Hour),
	}
}

func destructiveAction() testState {
	return testState{
		Title: "delete_database (destructive)",
		Fields: []bot.Field{
			{Label: "Arguments", Value: `{"db_name": "orders_prod"}`},
			{Label: "Dry run", Value: "would drop 41 tables, 1.2M rows"},
		},
		ExpiresAt: t0.Add(30 * time.Minute),
	}
}

// respType and respData pick an interaction response apart.
func respType(r map[string]any) int {
	f, _ := r["type"].(float64)
	return int(f)
}

func respData(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	d, ok := r["data"].(map[string]any)
	if !ok {
		t.Fatalf("response %v has no data, want a data object", r)
	}
	return d
}

// wantPrivate fails unless r is an ephemeral reply (type 4, flags 64)
// whose content contains every one of parts.
func wantPrivate(t *testing.T, r map[string]any, parts ...string) string {
	t.Helper()
	if respType(r) != 4 {
		t.Fatalf("response type %d, want 4 (a private reply): %v", respType(r), r)
	}
	d := respData(t, r)
	if f, _ := d["flags"].(float64); int(f)&64 == 0 {
		t.Fatalf("reply flags %v, want 64 (ephemeral): %v", d["flags"], d)
	}
	wantNoMentions(t, d)
	content, _ := d["content"].(string)
	for _, p := range parts {
		if !strings.Contains(content, p) {
			t.Errorf("private reply %q, want it to contain %q", content, p)
		}
	}
	return content
}

// wantNoMentions fails unless m carries allowed_mentions with an empty
// parse list.
func wantNoMentions(t *testing.T, m map[string]any) {
	t.Helper()
	am, ok := m["allowed_mentions"].(map[string]any)
	if !ok {
		t.Fatalf("no allowed_mentions in %v, want {parse: []}", m)
	}
	p, ok := am["parse"].([]any)
	if !ok || len(p) != 0 {
		t.Fatalf("allowed_mentions.parse = %v, want []", am["parse"])
	}
}

// customIDs lists the custom ids of a message's components.
func customIDs(m map[string]any) []string {
	var out []string
	rows, _ := m["components"].([]any)
	for _, r := range rows {
		row, _ := r.(map[string]any)
		cs, _ := row["components"].([]any)
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok {
				out = append(out, fmt.Sprint(cm["custom_id"]))
			}
		}
	}
	return out
}

// embed returns a message's first embed.
func embed(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	es, _ := m["embeds"].([]any)
	if len(es) == 0 {
		t.Fatalf("message %v has no embed, want one", m)
	}
	return es[0].(map[string]any)
}

// fieldValue returns the value of the embed field named name.
func fieldValue(e map[string]any, name string) (string, bool) {
	fs, _ := e["fields"].([]any)
	for _, f := range fs {
		fm := f.(map[string]any)
		if fm["name"] == name {
			return fmt.Sprint(fm["value"]), true
		}
	}
	return "", false
}

func TestPostsPendingItemsWithContentAndButtons(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mem := e.newItem(bot.KindMemoryChange, "default", memoryChange())
	act := e.newItem(bot.KindAction, "ops", destructiveAction())
	e.drain()

	posts := e.fake.CallsTo("POST", "channels/")
	if len(posts) != 2 {
		t.Fatalf("%d posts, want 2: %v", len(posts), posts)
	}
	tests := []struct {
		name    string
		call    discordtest.Call
		id      uint64
		channel string
		content string
		title   string
		field   string
		value   string
	}{
		{"memory change", posts[0], mem, chDefault, "a memory change awaits approval", "REPLACE active\\_medication", "Proposed", "apixaban 5mg twice daily"},
		{"destructive action", posts[1], act, chOps, "an action request awaits approval", "delete\\_database (destructive)", "Dry run", "would drop 41 tables, 1.2M rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if want := "channels/" + tc.channel + "/messages"; tc.call.Path != want {
				t.Errorf("posted to %s, want %s", tc.call.Path, want)
			}
			if tc.call.Auth != "Bot "+botToken {
				t.Errorf("Authorization %q, want the bot token", tc.call.Auth)
			}
			m := tc.call.JSON()
			wantNoMentions(t, m)
			if n, _ := m["nonce"].(string); n == "" || len(n) > 25 || m["enforce_nonce"] != true {
				t.Errorf("nonce %q enforce_nonce %v: want an enforced nonce of at most 25 characters", n, m["enforce_nonce"])
			}
			if c := fmt.Sprint(m["content"]); !strings.Contains(c, fmt.Sprintf("#%d", tc.id)) || !strings.Contains(c, tc.content) {
				t.Errorf("content %q, want #%d and %q", c, tc.id, tc.content)
			}
			em := embed(t, m)
			if title := fmt.Sprint(em["title"]); !strings.Contains(title, tc.title) {
				t.Errorf("title %q, want %q", title, tc.title)
			}
			if v, _ := fieldValue(em, tc.field); v != tc.value {
				t.Errorf("field %s = %q, want %q", tc.field, v, tc.value)
			}
			want := []string{customID(actApprove, tc.id), customID(actReject, tc.id)}
			if got := customIDs(m); !slices.Equal(got, want) {
				t.Errorf("buttons %v, want %v", got, want)
			}
			ref := e.ref(tc.id)
			if ref.ChannelID != tc.channel || e.fake.Message(ref.MessageID) == nil {
				t.Errorf("recorded ref %+v, want channel %s and the posted message", ref, tc.channel)
			}
		})
	}
	// A created event delivered again posts nothing new: with the other
	// surfaces, adapters/chattest's TestPendingItemIsPostedOnce.
}

// TestMappedMemberApproves: a member mapped by a role id approves (by
// user id, with the other surfaces, in adapters/chattest's
// TestEligibleClickApprovesAndUpdatesTheCard).
func TestMappedMemberApproves(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		who       discordtest.Clicker
		decidedBy string
	}{
		{"by role id", oncall, "oncall [222]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			id := e.newItem(bot.KindMemoryChange, "default", memoryChange())
			e.drain()
			ref := e.ref(id)
			e.clock.Advance(time.Minute)

			resp := e.click("i1", tc.who, id, customID(actApprove, id))
			if respType(resp) != 7 {
				t.Fatalf("response type %d, want 7 (update the clicked message): %v", respType(resp), resp)
			}
			d := respData(t, resp)
			wantNoMentions(t, d)
			if ids := customIDs(d); len(ids) != 0 {
				t.Errorf("buttons %v left on a decided message, want none", ids)
			}
			em := embed(t, d)
			if v, _ := fieldValue(em, "Outcome"); v != "✅ Approved" {
				t.Errorf("Outcome %q, want ✅ Approved", v)
			}
			if v, _ := fieldValue(em, "Decided by"); v != clip(chat.NameOf(tc.decidedBy), 100, inline) { // the name; the id is under Details
				t.Errorf("Decided by %q, want %q", v, tc.decidedBy)
			}
			if v, _ := fieldValue(em, "Decided at"); v != "2026-03-01 09:01 UTC" { // chat.Stamp: one time format on every surface
				t.Errorf("Decided at %q, want 2026-03-01 09:01 UTC", v)
			}

			it := e.item(id)
			if it.Status != "approved" || !slices.Equal(it.DecidedBy, []string{tc.decidedBy}) {
				t.Errorf("item: status %s decided_by %v, want approved by %s", it.Status, it.DecidedBy, tc.decidedBy)
			}
			if !e.auditHas(tc.decidedBy, "test_decide") {
				t.Errorf("audit %v, want an entry for the decision by %s", e.audit(), tc.decidedBy)
			}

			// The outbox then edits the message in place.
			e.drain()
			edits := e.fake.CallsTo("PATCH", "channels/"+ref.ChannelID+"/messages/"+ref.MessageID)
			if len(edits) != 1 {
				t.Fatalf("%d edits of the message, want 1", len(edits))
			}
			m := edits[0].JSON()
			wantNoMentions(t, m)
			if v, _ := fieldValue(embed(t, m), "Decided by"); v != clip(chat.NameOf(tc.decidedBy), 100, inline) {
				t.Errorf("edited Decided by %q, want %q", v, clip(chat.NameOf(tc.decidedBy), 100, inline))
			}
			if ids := customIDs(m); len(ids) != 0 {
				t.Errorf("edit keeps buttons %v, want none", ids)
			}
		})
	}
}

func TestRefusalsArePrivateAndAudited(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		who    discordtest.Clicker
		setup  func(*testState)
		reply  string
		audit  []string
		custom func(id uint64) string
	}{
		// An unmapped user (on Approve and on Reject), a viewer and the
		// requester are refused with the other surfaces in
		// adapters/chattest's TestIneligibleClicksAreRefusedPrivatelyAndAudited.
		{"direct message", discordtest.Clicker{UserID: uSmith}, nil, "configured Discord server", []string{"[111]", "access_denied", "direct message"}, nil},
		{"another server", discordtest.Clicker{UserID: uSmith, GuildID: "G2"}, nil, "configured Discord server", []string{"[111]", "access_denied", "server G2"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st := memoryChange()
			if tc.setup != nil {
				tc.setup(&st)
			}
			id := e.newItem(bot.KindMemoryChange, "default", st)
			e.drain()
			custom := customID(actApprove, id)
			if tc.custom != nil {
				custom = tc.custom(id)
			}
			resp := e.click("i1", tc.who, id, custom)
			wantPrivate(t, resp, tc.reply)
			if it := e.item(id); it.Status != "pending" {
				t.Errorf("item is %s after a refused click, want pending", it.Status)
			}
			if !e.auditHas(tc.audit...) {
				t.Errorf("audit %v, want an entry with %q", e.audit(), tc.audit)
			}
			e.drain()
			if n := len(e.fake.CallsTo("PATCH", "channels/")); n != 0 {
				t.Errorf("%d message edits after a refusal, want none (the message is unchanged)", n)
			}
		})
	}
}

func TestHTTPEndpointChecksSignatureAndFreshness(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := discordtest.Marshal(t, discordtest.Ping("p1"))
	now := e.clock.Now()
	send := func(stamp, sig string, body []byte) int {
		t.Helper()
		req, _ := http.NewRequest("POST", e.url, strings.NewReader(string(body)))
		if stamp != "" {
			req.Header.Set("X-Signature-Timestamp", stamp)
		}
		if sig != "" {
			req.Header.Set("X-Signature-Ed25519", sig)
		}
		resp, err := (&http.Client{Transport: discordtest.Transport()}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	stamp := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	tests := []struct {
		name  string
		stamp string
		sig   string
		body  []byte
		want  int
	}{
		{"valid", stamp(now), discordtest.Sign(e.key, stamp(now), body), body, 200},
		{"valid, 4 minutes old", stamp(now.Add(-4 * time.Minute)), discordtest.Sign(e.key, stamp(now.Add(-4*time.Minute)), body), body, 200},
		// A wrong key, a changed body, a stale, future or malformed
		// timestamp, no signature or one not hex: 401, with the other
		// surfaces in adapters/chattest's TestForgedDeliveriesAreRefused.
		{"signed but not JSON", stamp(now), discordtest.Sign(e.key, stamp(now), []byte("{nope")), []byte("{nope"), 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := send(tc.stamp, tc.sig, tc.body); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}

	status, resp := e.post(discordtest.Ping("p3"))
	if status != 200 || respType(resp) != 1 || len(resp) != 1 {
		t.Errorf("PING answered %d %v, want 200 {\"type\":1}", status, resp)
	}
}

// TestReplayedQuorumApprovalIsNotCountedTwice: a replayed click on a
// pending item never reaches the decision again: with a quorum of two, a
// replay of the first approval is recognised as a re-delivery, not taken
// as a second click. (A replay of a decided item's click and of a refused
// click: adapters/chattest's TestReplayedDeliveryIsAppliedOnce and
// TestIneligibleClicksAreRefusedPrivatelyAndAudited, on every surface.)
func TestReplayedQuorumApprovalIsNotCountedTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st := destructiveAction()
	st.Quorum = 2
	q := e.newItem(bot.KindAction, "ops", st)
	e.drain()
	if r := e.click("q-once", smith, q, customID(actApprove, q)); respType(r) != 7 {
		t.Fatalf("quorum click answered %v, want type 7", r)
	}
	wantPrivate(t, e.click("q-once", smith, q, customID(actApprove, q)), "not applied twice")
	if got := e.state(q); got.Applied != 0 || len(got.Approvals) != 1 {
		t.Errorf("after a replayed first approval: applied %d, approvals %v; want 0 and one approval", got.Applied, got.Approvals)
	}
}

// TestUnmappedReasonSubmitIsRefused: a reason form submitted by an
// unmapped user (who never had the form: a crafted submit) is refused
// privately and decides nothing. (Reject's form, a blank reason and the
// rejection itself: adapters/chattest's TestRejectAsksForAReason, on
// every surface.)
func TestUnmappedReasonSubmitIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.newItem(bot.KindMemoryChange, "default", memoryChange())
	e.drain()
	ref := e.ref(id)
	_, resp := e.post(discordtest.Submit("r4", stranger, ref.ChannelID, ref.MessageID, customID(actReason, id), "no"))
	wantPrivate(t, resp, "not mapped")
	if it := e.item(id); it.Status != "pending" {
		t.Errorf("item %s after an unmapped submit, want pending", it.Status)
	}
}

// TestSweeperClosureEditsEveryMessage: a closed item's every message is
// edited, a deleted one (404) skipped without holding the outbox. (The
// expired card itself and a late click on it: adapters/chattest's
// TestExpiredItemLosesItsButtons, on every surface.)
func TestSweeperClosureEditsEveryMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.newItem(bot.KindAction, "ops", destructiveAction())
	e.drain()
	ref := e.ref(id)
	// A second message of the same item (posted by an earlier version).
	if err := e.bot.Items().AddMessageRef(context.Background(), id, bot.MessageRef{Platform: Sink, ChannelID: chDefault, MessageID: "gone"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(31 * time.Minute)
	e.closeAs(id, "expired")
	e.drain()
	edits := e.fake.CallsTo("PATCH", "channels/")
	if len(edits) != 2 {
		t.Fatalf("%d edits, want 2 (one per message)", len(edits))
	}
	if v, _ := fieldValue(embed(t, e.fake.Message(ref.MessageID)), "Outcome"); v != "⌛ Expired" {
		t.Errorf("Outcome %q, want ⌛ Expired", v)
	}
	// The deleted message (404) was skipped; nothing is left queued.
	if n, _ := e.bot.Outbox().Depth(context.Background(), Sink); n != 0 {
		t.Errorf("%d events left in the outbox, want 0", n)
	}
}

func TestPermanentAndTransientFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		perm   bool
	}{
		{400, true}, {403, true}, {404, true}, {401, false}, {408, false}, {500, false}, {503, false},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			e := newEnv(t)
			id := e.newItem(bot.KindMemoryChange, "default", memoryChange())
			e.fake.Fail(discordtest.Failure{Method: "POST", Prefix: "channels/", Status: tc.status, Body: `{"message":"no","code":0}`})
			err := e.deliver(bot.Event{Type: bot.EventCreated, ItemID: id})
			var perm *bot.PermanentError
			if err == nil || errors.As(err, &perm) != tc.perm {
				t.Errorf("Deliver = %v (%T), want permanent=%v", err, err, tc.perm)
			}
		})
	}
}

func TestInjectedMentionsRenderInert(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st := memoryChange()
	st.Title = "REPLACE note: @everyone"
	st.Fields = []bot.Field{{Label: "Proposed", Value: "@everyone <@123> <@&456> @here **APPROVED** [click](https://evil.example)\n> Decided by: admin"}}
	st.RequesterName = "agent_<@789>"
	id := e.newItem(bot.KindMemoryChange, "default", st)
	e.drain()
	resp := e.click("inj", smith, id, customID(actApprove, id))
	e.drain()

	m := e.fake.Message(e.ref(id).MessageID)
	v, _ := fieldValue(embed(t, m), "Proposed")
	for _, want := range []string{"@" + zwsp + "everyone", `\<` + zwsp + "@123>", `\<` + zwsp + "@&456>", "@" + zwsp + "here", `\*\*APPROVED\*\*`, `\[click\]`, `\> Decided by`} {
		if !strings.Contains(v, want) {
			t.Errorf("field value %q lacks %q", v, want)
		}
	}
	raw, _ := json.Marshal(m)
	for _, live := range []string{"<@123>", "<@&456>", "<@789>"} {
		if strings.Contains(string(raw), live) {
			t.Errorf("a live mention %s is in the message, want none: %s", live, raw)
		}
	}
	for _, s := range []string{string(raw), fmt.Sprint(resp)} {
		if strings.Contains(strings.ReplaceAll(s, "@"+zwsp, ""), "@everyone") {
			t.Errorf("a live @everyone is in %s, want none", s)
		}
	}
	// allowed_mentions is empty on every message sent: posts, edits and
	// interaction responses.
	wantNoMentions(t, respData(t, resp))
	calls := e.fake.Calls()
	if len(calls) < 2 {
		t.Fatalf("calls %v, want at least the post and the edit", calls)
	}
	for _, c := range calls {
		if c.Method == "POST" || c.Method == "PATCH" {
			wantNoMentions(t, c.JSON())
		}
	}
}

// TestDecliningAQuestionTakesNoReason: Decline opens a modal whose reason
// is optional, and an empty one declines. (Answering a question, on every
// surface: adapters/chattest's TestQuestionsAreAnswered.)
func TestDecliningAQuestionTakesNoReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	third := e.newItem(bot.KindQuestion, "default", testState{Title: "Deploy now?", Options: []string{"yes", "no"}})
	e.drain()
	modal := e.click("a4", smith, third, customID(actReject, third))
	if respType(modal) != 9 {
		t.Fatalf("decline answered %v, want type 9 (a modal)", modal)
	}
	ref := e.ref(third)
	_, resp := e.post(discordtest.Submit("a5", smith, ref.ChannelID, ref.MessageID, customID(actReason, third), ""))
	if respType(resp) != 7 {
		t.Fatalf("decline submit answered %v, want type 7", resp)
	}
	if st := e.state(third); st.Status != "rejected" {
		t.Errorf("declined question state %s, want rejected", st.Status)
	}
}

func TestUnknownCustomIDsDoNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.newItem(bot.KindMemoryChange, "default", memoryChange())
	e.drain()
	for _, custom := range []string{"approval:approve:1", "cs:approve:x", "cs:delete:1", "cs:reason:1", strings.Repeat("c", 200)} {
		wantPrivate(t, e.click("u-"+custom[:4], smith, id, custom), "not one of Countersign's")
	}
	wantPrivate(t, e.click("u-missing", smith, id, customID(actApprove, 4242)), "No item #4242")
	if it := e.item(id); it.Status != "pending" {
		t.Errorf("item %s, want pending", it.Status)
	}
}

func TestSlashCommandRunsChatops(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, resp := e.post(discordtest.Command("s1", smith, chDefault, "help"))
	want := chat.Run(context.Background(), e.bot, e.bot.Chat().Caller("discord", uSmith, nil), Sink, uSmith, "help")
	content := wantPrivate(t, resp)
	if content != clip(want.Text, maxContent, block) {
		t.Errorf("command reply %q, want chat's %q", content, want.Text)
	}
	// A replayed command is not run twice.
	_, resp = e.post(discordtest.Command("s1", smith, chDefault, "help"))
	wantPrivate(t, resp, "not run twice")
	// Outside the configured server: refused and audited.
	_, resp = e.post(discordtest.Command("s2", discordtest.Clicker{UserID: uSmith}, chDefault, "pending"))
	wantPrivate(t, resp, "configured Discord server")
	if !e.auditHas("access_denied", "command refused") {
		t.Errorf("audit %v, want the refused command audited", e.audit())
	}
}

func TestGatewayModeEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- e.a.RunGateway(ctx) }()
	go func() { done <- e.a.RunOutbox(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			<-done
		}
	})
	id := e.newItem(bot.KindAction, "ops", destructiveAction())
	e.fake.Wait("the item to be posted", func() bool { return len(refs(e.item(id))) == 1 })
	ref := e.ref(id)

	e.fake.Wait("identify", func() bool { return len(e.fake.Identifies()) == 1 })
	if idf := e.fake.Identifies()[0]; idf.Token != "Bot "+botToken || idf.Intents != 0 {
		t.Errorf("identify %+v, want the bot token and no intents", idf)
	}

	e.fake.Dispatch(discordtest.Click("g1", stranger, ref.ChannelID, ref.MessageID, customID(actApprove, id)))
	e.fake.Wait("the refusal", func() bool { return len(e.fake.CallsTo("POST", "interactions/g1/tok-g1/callback")) == 1 })
	r := e.fake.CallsTo("POST", "interactions/g1/tok-g1/callback")[0].JSON()
	wantPrivate(t, r, "not mapped")

	e.fake.Dispatch(discordtest.Click("g2", oncall, ref.ChannelID, ref.MessageID, customID(actApprove, id)))
	e.fake.Wait("the update", func() bool { return len(e.fake.CallsTo("POST", "interactions/g2/tok-g2/callback")) == 1 })
	r = e.fake.CallsTo("POST", "interactions/g2/tok-g2/callback")[0].JSON()
	if respType(r) != 7 {
		t.Fatalf("callback %v, want type 7", r)
	}
	if it := e.item(id); it.Status != "approved" || !slices.Equal(it.DecidedBy, []string{"oncall [222]"}) {
		t.Errorf("item %s by %v, want approved by oncall [222]", it.Status, it.DecidedBy)
	}
	e.fake.Wait("the outbox edit", func() bool {
		return len(e.fake.CallsTo("PATCH", "channels/"+ref.ChannelID+"/messages/"+ref.MessageID)) == 1
	})

	e.fake.Dispatch(discordtest.Command("g3", smith, chOps, "help"))
	e.fake.Wait("the command reply", func() bool { return len(e.fake.CallsTo("POST", "interactions/g3/tok-g3/callback")) == 1 })
	wantPrivate(t, e.fake.CallsTo("POST", "interactions/g3/tok-g3/callback")[0].JSON())
}

// TestGatewayAnswerFailureLogsNoToken: when answering an interaction over
// REST fails on the network, the client's error quotes the callback URL,
// which carries the interaction's token; the log says what failed without
// it.
func TestGatewayAnswerFailureLogsNoToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.a.RunGateway(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.fake.Wait("identify", func() bool { return len(e.fake.Identifies()) == 1 })

	e.fake.Fail(discordtest.Failure{Method: "POST", Prefix: "interactions/g9/", Drop: true})
	e.fake.Dispatch(discordtest.Command("g9", smith, chOps, "help"))
	e.fake.Wait("the failed answer to be logged", func() bool {
		return strings.Contains(e.logs.String(), "answering an interaction failed")
	})
	logs := e.logs.String()
	if strings.Contains(logs, "tok-g9") {
		t.Errorf("the log quotes the interaction token, want it redacted:\n%s", logs)
	}
	if !strings.Contains(logs, "[redacted]") || !strings.Contains(logs, "interaction=g9") {
		t.Errorf("the log does not say which interaction failed, want interaction=g9 and the URL [redacted]:\n%s", logs)
	}
}

func TestRegisterCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.a.RegisterCommands(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := e.fake.CallsTo("POST", "applications/"+testAppID+"/guilds/"+guild+"/commands")
	if len(calls) != 1 {
		t.Fatalf("calls %v, want one command registration", e.fake.Calls())
	}
	m := calls[0].JSON()
	opts, _ := m["options"].([]any)
	if m["name"] != CommandName || len(opts) != 1 || opts[0].(map[string]any)["name"] != "command" {
		t.Errorf("command %v, want %s with one option named command", m, CommandName)
	}
}

func TestRewriteTransport(t *testing.T) {
	t.Parallel()
	var got []string
	rt := &rewriteTransport{target: apiTarget{scheme: "http", host: "127.0.0.1:9", prefix: "/fake/api/v10/"}, base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.URL.String())
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	})}
	tests := []struct {
		url  string
		want string // "" = refused
	}{
		{"https://discord.com/api/v9/channels/1/messages", "http://127.0.0.1:9/fake/api/v10/channels/1/messages"},
		{"https://discord.com/api/v9/webhooks/A/t/messages/@original", "http://127.0.0.1:9/fake/api/v10/webhooks/A/t/messages/@original"},
		{"https://evil.example/api/v9/channels/1/messages", ""},
		{"https://cdn.discordapp.com/avatars/1.png", ""},
		{"https://discord.com/oauth2/authorize", ""},
	}
	for _, tc := range tests {
		got = nil
		u, _ := url.Parse(tc.url)
		_, err := rt.RoundTrip(&http.Request{Method: "GET", URL: u, Header: http.Header{}})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s was sent, want refused", tc.url)
		case tc.want != "" && (err != nil || len(got) != 1 || got[0] != tc.want):
			t.Errorf("%s -> %v %v, want %s", tc.url, got, err, tc.want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := Options{Bot: e.bot, Token: "t", Channels: map[string]string{"default": "C"}}
	tests := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no token", func(o *Options) { o.Token = " " }, "token"},
		{"plain http to a remote host", func(o *Options) { o.APIURL = "http://discord.example/api/v10/" }, "https"},
		{"no trailing slash", func(o *Options) { o.APIURL = "https://discord.com/api/v10" }, "end with '/'"},
		{"not a URL", func(o *Options) { o.APIURL = "discord" }, "absolute"},
		{"short public key", func(o *Options) { o.PublicKey = []byte{1, 2} }, "public key"},
		{"no default channel", func(o *Options) { o.Channels = map[string]string{"ops": "C"} }, "default channel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.mod(&o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error about %q", err, tc.want)
			}
		})
	}
	if _, err := New(base); err != nil {
		t.Errorf("New with good options: %v, want nil", err)
	}
}

func TestEscalationNamesTheRoleAndPostsToTheEscalationChannel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.newItem(bot.KindAction, "ops", destructiveAction())
	e.drain()
	err := e.bot.Update(context.Background(), e.bot.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
		return tx.Emit(id, bot.EventEscalated, "channel=default role=admin")
	})
	if err != nil {
		t.Fatal(err)
	}
	e.drain()
	thread := e.fake.CallsTo("POST", "channels/"+chOps+"/messages")
	if len(thread) != 2 {
		t.Fatalf("%d posts in ops, want the item and the escalation reply", len(thread))
	}
	c := fmt.Sprint(thread[1].JSON()["content"])
	if !strings.Contains(c, "Escalated to role admin.") || strings.Contains(c, "channel=") {
		t.Errorf("escalation reply %q: want the role named and no raw routing note", c)
	}
	copies := e.fake.CallsTo("POST", "channels/"+chDefault+"/messages")
	if len(copies) != 1 {
		t.Fatalf("%d posts in the escalation channel, want the item once", len(copies))
	}
	if ids := customIDs(copies[0].JSON()); len(ids) == 0 {
		t.Error("the escalated copy has no buttons")
	}
	it, err := e.bot.Items().Get(context.Background(), id)
	if err != nil || len(refs(it)) != 2 {
		t.Fatalf("item refs = %+v, %v; want both messages recorded so both are updated", it.Messages, err)
	}
}

// TestEscalationMentionsThePersonOnCall: an escalation to the person on
// call mentions their Discord user, and allows that one mention only (no
// role, no @everyone); a person on call with no Discord user is named, not
// pinged.
func TestEscalationMentionsThePersonOnCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		person  string
		mention string
	}{{"dr_smith", "<@" + uSmith + ">"}, {"oncall", ""}} {
		id := e.newItem(bot.KindAction, "ops", destructiveAction())
		e.drain()
		err := e.bot.Update(context.Background(), e.bot.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
			return tx.Emit(id, bot.EventEscalated, bot.OnCallNote("ward", c.person))
		})
		if err != nil {
			t.Fatal(err)
		}
		e.drain()
		posts := e.fake.CallsTo("POST", "channels/"+chOps+"/messages")
		reply := posts[len(posts)-1].JSON()
		content := fmt.Sprint(reply["content"])
		am, _ := reply["allowed_mentions"].(map[string]any)
		users := fmt.Sprint(am["users"])
		if !strings.Contains(content, "Escalated to the ward on-call, "+strings.ReplaceAll(c.person, "_", `\_`)+".") { // escaped Markdown
			t.Errorf("%s: the reply %q does not name the person on call", c.person, content)
		}
		switch {
		case c.mention != "" && (!strings.HasSuffix(content, " "+c.mention) || users != "["+uSmith+"]"):
			t.Errorf("%s: content %q, allowed users %s; want it to end with %s and allow that user only", c.person, content, users, c.mention)
		case c.mention == "" && (strings.Contains(content, "<@") || am["users"] != nil):
			t.Errorf("%s: content %q, allowed users %v; want no mention", c.person, content, am["users"])
		}
		if parse, _ := am["parse"].([]any); am == nil || len(parse) != 0 {
			t.Errorf("%s: allowed_mentions %v, want parse empty (no roles, no @everyone)", c.person, am)
		}
	}
}
