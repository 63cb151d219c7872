package slack

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/countersign/countersign/adapters/slack/slacktest"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

func memoryTestItem() testItem {
	return testItem{
		Title: "Replace active_medication for patient default", Requester: "intake_agent",
		Fields: []bot.Field{
			{Label: "Space", Value: "default//"}, {Label: "Subject", Value: "active_medication"},
			{Label: "Current", Value: "warfarin 5mg daily"}, {Label: "Proposed", Value: "apixaban 5mg twice daily"},
			{Label: "Said", Value: "Switch her to apixaban 5mg twice daily."}, {Label: "Source", Value: "intake_agent"},
			{Label: "Confidence", Value: "0.92"},
		},
	}
}

func actionTestItem() testItem {
	return testItem{
		Title: "delete_database (destructive) requested by deploy_bot", Requester: "deploy_bot",
		ExpiresAt: time.Date(2026, 1, 1, 9, 30, 0, 0, time.UTC),
		Fields: []bot.Field{
			{Label: "Tool", Value: "delete_database"}, {Label: "Category", Value: "destructive"},
			{Label: "Arguments", Value: `{"db_name": "orders_prod"}`},
			{Label: "Dry-run plan", Value: "DROP DATABASE orders_prod;\n-- 42 tables"},
		},
	}
}

// blockJSON is the blocks of a call as JSON, for substring assertions, with
// json.Marshal's HTML escapes (\u003c, \u003e, \u0026) undone so that a
// live <!channel> cannot hide from a check.
func blockJSON(c slacktest.Call) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(c.Form.Get("blocks"))
}

// buttons returns the action_id -> value of the call's actions blocks.
func buttons(t *testing.T, c slacktest.Call) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, b := range c.Blocks(t) {
		if b["type"] != "actions" {
			continue
		}
		for _, el := range b["elements"].([]any) {
			m := el.(map[string]any)
			if v, ok := m["value"].(string); ok {
				out[m["action_id"].(string)] = v
			}
		}
	}
	return out
}

func TestPostsPendingItemsWithContentAndButtons(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mem := e.create(bot.KindMemoryChange, "default", memoryTestItem())
	act := e.create(bot.KindAction, "ops", actionTestItem())
	other := e.create(bot.KindConsent, "nowhere", testItem{Title: "share the summary with the family", Requester: "agent"})
	e.drain()

	posts := e.fake.Calls("chat.postMessage")
	if len(posts) != 3 {
		t.Fatalf("%d posts, want 3", len(posts))
	}
	wantChannel := map[uint64]string{mem: chDefault, act: chOps, other: chDefault}
	for i, id := range []uint64{mem, act, other} {
		p := posts[i]
		if got := p.Form.Get("channel"); got != wantChannel[id] {
			t.Errorf("item %d posted to %s, want %s", id, got, wantChannel[id])
		}
		if p.Form.Get("token") != "xoxb-test" {
			t.Errorf("item %d posted with token %q, want the bot token xoxb-test", id, p.Form.Get("token"))
		}
		v := strconv.FormatUint(id, 10)
		if b := buttons(t, p); b[actionApprove] != v || b[actionReject] != v || len(b) != 2 {
			t.Errorf("item %d buttons = %v, want approve and reject with value %s", id, b, v)
		}
		ref := e.ref(id)
		if ref.ChannelID != wantChannel[id] || ref.MessageID == "" {
			t.Errorf("item %d message ref = %+v, want channel %s and a message id", id, ref, wantChannel[id])
		}
	}
	memBlocks := blockJSON(posts[0])
	for _, want := range []string{"Replace active_medication for patient default", "`warfarin 5mg daily`", "`apixaban 5mg twice daily`",
		"Switch her to apixaban 5mg twice daily.", "`0.92`", "Requested by *intake_agent*", "Item #" + strconv.FormatUint(mem, 10)} {
		if !strings.Contains(memBlocks, want) {
			t.Errorf("memory proposal message lacks %q:\n%s", want, memBlocks)
		}
	}
	actBlocks := blockJSON(posts[1])
	for _, want := range []string{"delete_database (destructive)", "`destructive`", "DROP DATABASE orders_prod;", "Expires <!date^1767259800^", "Requested by *deploy_bot*", `"confirm"`} {
		if !strings.Contains(actBlocks, want) {
			t.Errorf("action request message lacks %q:\n%s", want, actBlocks)
		}
	}
	if !strings.HasPrefix(posts[1].Form.Get("text"), "Approval needed: delete_database") {
		t.Errorf("notification text = %q, want it to start Approval needed: delete_database", posts[1].Form.Get("text"))
	}
	// A created event delivered again posts nothing twice: with the other
	// surfaces, adapters/chattest's TestPendingItemIsPostedOnce.
}

// TestSignatureAndTimestampAreChecked: the slash command endpoint checks
// the signature and the timestamp as the interactions endpoint does (that
// one, with every surface's, in adapters/chattest's
// TestForgedDeliveriesAreRefused); a signed body that is not a Slack form
// is a 400, never a 500.
func TestSignatureAndTimestampAreChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const path = "/slack/commands"
	f := url.Values{"team_id": {team}, "user_id": {drSmith}, "command": {"/countersign"}, "text": {"approve 1"}, "trigger_id": {newTrigger()}}
	if code, _ := e.post(path, f, "wrong-secret", time.Now()); code != http.StatusUnauthorized {
		t.Errorf("%s: bad signature answered %d, want 401", path, code)
	}
	if code, _ := e.post(path, f, testSecret, time.Now().Add(-6*time.Minute)); code != http.StatusUnauthorized {
		t.Errorf("%s: 6-minute-old timestamp answered %d, want 401", path, code)
	}
	if code, _ := e.post(path, f, testSecret, time.Now().Add(6*time.Minute)); code != http.StatusUnauthorized {
		t.Errorf("%s: future timestamp answered %d, want 401", path, code)
	}
	resp, err := http.Post(e.srv.URL+path, "application/x-www-form-urlencoded", strings.NewReader(f.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("%s: unsigned request answered %d, want 401", path, resp.StatusCode)
	}
	select {
	case c := <-e.cmds:
		t.Fatalf("a rejected command ran (%+v), want none run", c)
	default:
	}
	// Signed but not a Slack form: 400, never 500.
	if code, _ := e.post("/slack/interactions", url.Values{"payload": {"{not json"}}, testSecret, time.Now()); code != http.StatusBadRequest {
		t.Errorf("malformed payload answered %d, want 400", code)
	}
	if code, _ := e.post("/slack/interactions", url.Values{}, testSecret, time.Now()); code != http.StatusBadRequest {
		t.Errorf("empty form answered %d, want 400", code)
	}
}

func TestConcurrentClicksDecideOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 3 { // four workers in all, so the two clicks race
		e.wg.Go(func() { e.ad.work(e.ctx) })
	}
	id := e.create(bot.KindAction, "ops", actionTestItem())
	e.drain()
	ref := e.ref(id)
	errs := make(chan error, 2)
	for _, u := range []string{drSmith, nurseJo} {
		go func() {
			code, _ := e.interact(clickPayload(u, actionApprove, strconv.FormatUint(id, 10), ref, newTrigger()))
			if code != http.StatusOK {
				errs <- errors.New("click not acknowledged")
				return
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "one decision and one private answer", func() bool {
		return e.state(id).Status == "approved" && len(e.fake.Calls("chat.postEphemeral")) == 1
	})
	st := e.state(id)
	if st.Decisions != 1 || len(st.DecidedBy) != 1 {
		t.Fatalf("two concurrent clicks: %+v, want one decision by one approver", st)
	}
	loser := drSmith
	if st.DecidedBy[0] == "dr_smith [U0123ABC]" {
		loser = nurseJo
	}
	if eph := e.ephemerals(loser); len(eph) != 1 || !strings.Contains(eph[0].Form.Get("text"), "approved by "+st.DecidedBy[0]) {
		t.Errorf("the second clicker was told %+v, want one private answer saying approved by %s", eph, st.DecidedBy[0])
	}
}

func TestQuorumTallyRemindersAndEscalations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	it := actionTestItem()
	it.Quorum = 2
	id := e.create(bot.KindAction, "default", it)
	e.drain()
	ref := e.ref(id)

	if code, _ := e.interact(clickPayload(drSmith, actionApprove, strconv.FormatUint(id, 10), ref, newTrigger())); code != http.StatusOK {
		t.Fatal(code)
	}
	e.barrier()
	if eph := e.ephemerals(drSmith); len(eph) != 1 || !strings.Contains(eph[0].Form.Get("text"), "1 of 2 approvals") {
		t.Fatalf("first of two approvers was told %+v, want one private answer saying 1 of 2 approvals", eph)
	}
	e.drain()
	u := e.fake.Calls("chat.update")
	if len(u) != 1 || !strings.Contains(blockJSON(u[0]), "1 of 2 approvals: dr_smith [U0123ABC]") || len(buttons(t, u[0])) != 2 {
		t.Fatalf("tally update: %+v, want one chat.update showing 1 of 2 approvals: dr_smith [U0123ABC] and both buttons", u)
	}

	if err := emitNote(context.Background(), e.bot, id, bot.EventReminder, "Reminder: @here <!channel> waited 10m"); err != nil {
		t.Fatal(err)
	}
	if err := emitNote(context.Background(), e.bot, id, bot.EventEscalated, "channel=ops role=member"); err != nil {
		t.Fatal(err)
	}
	e.drain()
	posts := e.fake.Calls("chat.postMessage")
	if len(posts) != 4 {
		t.Fatalf("%d posts, want the item, a reminder, an escalation and the item in the escalation channel", len(posts))
	}
	rem, esc, moved := posts[1], posts[2], posts[3]
	if rem.Form.Get("thread_ts") != ref.MessageID || rem.Form.Get("channel") != ref.ChannelID || rem.Form.Get("reply_broadcast") != "" {
		t.Errorf("reminder posted with %v, want it in the item's thread (thread_ts %s, channel %s) and not broadcast", rem.Form, ref.MessageID, ref.ChannelID)
	}
	if got := rem.Form.Get("text"); got != "⏰ Reminder: @\u2060here &lt;!channel&gt; waited 10m" {
		t.Errorf("reminder text = %q, want the note with its markup inert", got)
	}
	want := "📣 Escalated: #" + strconv.FormatUint(id, 10) + " still awaits a decision. Escalated to role member: <@U0123ABC> <@U0456DEF>"
	if esc.Form.Get("thread_ts") != ref.MessageID || esc.Form.Get("reply_broadcast") != "true" || esc.Form.Get("text") != want {
		t.Errorf("escalation: %v, want text %q", esc.Form, want)
	}
	if moved.Form.Get("channel") != chOps || len(buttons(t, moved)) != 2 || moved.Form.Get("thread_ts") != "" {
		t.Errorf("item in the escalation channel posted with %v, want a top-level post in %s with both buttons", moved.Form, chOps)
	}
	if n := len(refs(e.item(id))); n != 2 {
		t.Fatalf("%d message refs, want 2 (the escalation channel's message recorded with the item)", n)
	}
	// The same escalation again does not post the item a third time.
	if err := emitNote(context.Background(), e.bot, id, bot.EventEscalated, "channel=ops"); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if n := len(e.fake.Calls("chat.postMessage")); n != 6 {
		t.Errorf("%d posts after a second escalation, want two more thread replies only", n)
	}

	if code, _ := e.interact(clickPayload(nurseJo, actionApprove, strconv.FormatUint(id, 10), ref, newTrigger())); code != http.StatusOK {
		t.Fatal(code)
	}
	e.barrier()
	if st := e.state(id); st.Status != "approved" {
		t.Fatalf("quorum reached: %+v, want approved", st)
	}
	e.drain()
	ups := e.fake.Calls("chat.update")
	if len(ups) != 3 || ups[1].Form.Get("channel") != chDefault || ups[2].Form.Get("channel") != chOps ||
		len(buttons(t, ups[1])) != 0 || len(buttons(t, ups[2])) != 0 {
		t.Fatalf("chat.update calls %+v, want both messages (%s, %s) updated without buttons", ups, chDefault, chOps)
	}
	// A reminder queued after the decision is not posted.
	if err := emitNote(context.Background(), e.bot, id, bot.EventReminder, "late"); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if n := len(e.fake.Calls("chat.postMessage")); n != 6 {
		t.Errorf("%d posts after a reminder for a decided item, want still 6 (not posted)", n)
	}
}

func TestRateLimitIsRetriedAfterRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fake.RateLimit("chat.postMessage", 7)
	id := e.create(bot.KindAction, "ops", actionTestItem())
	err := e.deliver(bot.Event{Type: bot.EventCreated, ItemID: id})
	var ra *bot.RetryAfterError
	if !errors.As(err, &ra) || ra.After != 7*time.Second {
		t.Fatalf("429 delivered as %v, want RetryAfterError of 7s", err)
	}

	e.fake.RateLimit("chat.postMessage", 7)
	e.drain() // the queued event meets the 429 again and is held back
	if n, _ := e.bot.Outbox().Depth(context.Background(), Sink); n != 1 {
		t.Fatalf("outbox depth %d after a 429, want the event kept", n)
	}
	e.clock.Advance(6 * time.Second)
	e.drain()
	if n := len(e.fake.Calls("chat.postMessage")); n != 2 {
		t.Fatalf("%d chat.postMessage calls before Retry-After, want 2 (no retry yet)", n)
	}
	e.clock.Advance(2 * time.Second)
	e.drain()
	if n, _ := e.bot.Outbox().Depth(context.Background(), Sink); n != 0 || len(e.fake.Calls("chat.postMessage")) != 3 {
		t.Fatalf("outbox depth %d after Retry-After, want 0 and the third post made", n)
	}
	ref := e.ref(id)

	// A rate-limited chat.update never holds up a click: the click is
	// acknowledged and decided, and the update waits in the outbox.
	e.fake.RateLimit("chat.update", 30)
	if code, _ := e.interact(clickPayload(drSmith, actionApprove, strconv.FormatUint(id, 10), ref, newTrigger())); code != http.StatusOK {
		t.Fatal(code)
	}
	e.barrier()
	if st := e.state(id); st.Status != "approved" {
		t.Fatalf("after the click: %+v, want approved without waiting on Slack", st)
	}
	e.drain()
	if n, _ := e.bot.Outbox().Depth(context.Background(), Sink); n != 1 {
		t.Fatalf("outbox depth %d, want 1 (the rate-limited update kept)", n)
	}
	e.clock.Advance(31 * time.Second)
	e.drain()
	if u := e.fake.Calls("chat.update"); len(u) != 2 || len(buttons(t, u[1])) != 0 {
		t.Fatalf("chat.update calls after the rate limit: %+v, want 2, the last without buttons", u)
	}
}

func TestDeliveryErrorsAreClassified(t *testing.T) {
	t.Parallel()
	cases := []struct {
		method, code string
		permanent    bool
	}{
		{"chat.postMessage", "channel_not_found", true},
		{"chat.postMessage", "not_in_channel", true},
		{"chat.postMessage", "invalid_blocks", true},
		{"chat.postMessage", "invalid_auth", false},
		{"chat.postMessage", "internal_error", false},
	}
	for _, c := range cases {
		e := newEnv(t)
		e.fake.SlackError(c.method, c.code)
		id := e.create(bot.KindAction, "ops", actionTestItem())
		err := e.deliver(bot.Event{Type: bot.EventCreated, ItemID: id})
		var perm *bot.PermanentError
		if err == nil || errors.As(err, &perm) != c.permanent {
			t.Errorf("%s %s: %v, permanent want %v", c.method, c.code, err, c.permanent)
		}
	}
	e := newEnv(t)
	e.fake.Fail("chat.postMessage", func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	id := e.create(bot.KindAction, "ops", actionTestItem())
	err := e.deliver(bot.Event{Type: bot.EventCreated, ItemID: id})
	var perm *bot.PermanentError
	if err == nil || errors.As(err, &perm) {
		t.Errorf("503: %v, want a retryable error", err)
	}
	if err := e.deliver(bot.Event{Type: bot.EventCreated, ItemID: 999}); !errors.As(err, &perm) {
		t.Errorf("unknown item: %v, want permanent", err)
	}
	// An item whose source cannot render it is retried a few times, then
	// given up so that it does not hold every later delivery back.
	var broken uint64
	if err := e.bot.Update(context.Background(), e.bot.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
		var err error
		broken, err = tx.NewItem(bot.KindAction, "gone", bot.Space{UserID: "default"}, "ops", time.Time{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.deliver(bot.Event{Type: bot.EventCreated, ItemID: broken}); err == nil || errors.As(err, &perm) {
		t.Errorf("unrenderable item, first try: %v, want a retryable error", err)
	}
	// Through the outbox: id's post (503 above, then accepted) goes out, and
	// the unrenderable item is given up after bot.GiveUpAfter tries.
	for range bot.GiveUpAfter {
		e.drain()
		e.clock.Advance(time.Hour)
	}
	if n, _ := e.bot.Outbox().Depth(context.Background(), Sink); n != 0 {
		t.Fatalf("outbox depth %d after %d tries of an unrenderable item, want it given up", n, bot.GiveUpAfter)
	}
	if g, err := e.bot.Outbox().GivenUp(context.Background(), Sink, 10); err != nil || len(g) != 1 || g[0].ItemID != broken {
		t.Fatalf("given up = %+v, %v; want the unrenderable item's event", g, err)
	}

	// A deleted message is skipped; the item's other messages still update.
	if err := e.bot.Items().AddMessageRef(context.Background(), id, bot.MessageRef{Platform: Sink, ChannelID: chDefault, MessageID: "1.0"}); err != nil {
		t.Fatal(err)
	}
	e.fake.SlackError("chat.update", "message_not_found")
	if err := e.deliver(bot.Event{Type: bot.EventUpdated, ItemID: id}); err != nil {
		t.Fatalf("update with one deleted message: %v, want nil (the deleted one skipped)", err)
	}
	if n := len(e.fake.Calls("chat.update")); n != 2 {
		t.Errorf("%d chat.update calls, want both messages tried", n)
	}
}

func TestInjectedMarkupIsInert(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	it := memoryTestItem()
	it.Fields[3].Value = "<!channel> @everyone <@U0123ABC> <https://evil.example|approve here> @here"
	it.Title = "<!here> approve me -> now"
	id := e.create(bot.KindMemoryChange, "default", it)
	e.drain()
	p := e.fake.Calls("chat.postMessage")[0]
	// Slack parses markup in mrkdwn text objects and in the message text,
	// and shows plain_text objects literally (docs.slack.dev, "Text
	// object": markup applies "when type is mrkdwn").
	var blocks any
	if err := json.Unmarshal([]byte(blockJSON(p)), &blocks); err != nil {
		t.Fatal(err)
	}
	var parsed, literal []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if txt, ok := v["text"].(string); ok {
				if v["type"] == "plain_text" {
					literal = append(literal, txt)
				} else {
					parsed = append(parsed, txt)
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(blocks)
	all := strings.Join(parsed, "\n") + p.Form.Get("text")
	for _, bad := range []string{"<!channel>", "<!here>", "<@U0123ABC>", "<https://", "@everyone", "@here"} {
		if strings.Contains(all, bad) {
			t.Errorf("posted message holds live markup %q, want it inert:\n%s", bad, all)
		}
	}
	for _, want := range []string{"&lt;!channel&gt; @\u2060everyone &lt;@U0123ABC&gt; &lt;https://evil.example|approve here&gt; @\u2060here", "&lt;!here&gt; approve me -&gt; now"} {
		if !strings.Contains(all, want) {
			t.Errorf("posted message lacks the inert text %q:\n%s", want, all)
		}
	}
	// In plain_text the title is shown as written: no "&gt;" for an arrow
	// (issue 14); an invisible word joiner after "<" keeps even a client
	// that parsed it from seeing a mention.
	if !slices.Contains(literal, "<\u2060!here> approve me -> now") {
		t.Errorf("header plain_text %q, want the title shown literally with a word joiner after <", literal)
	}
	for _, l := range literal {
		if strings.Contains(l, "&gt;") || strings.Contains(l, "&lt;") || strings.Contains(l, "&amp;") {
			t.Errorf("plain_text %q holds an HTML entity Slack would show literally, want none", l)
		}
	}
	if b := buttons(t, p); len(b) != 2 || b[actionApprove] != strconv.FormatUint(id, 10) {
		t.Errorf("buttons %v, want approve and reject with value %d", b, id)
	}
}

func TestSlashCommandsReachChatopsAndAnswerPrivately(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	form := url.Values{"team_id": {team}, "user_id": {drSmith}, "channel_id": {chOps}, "command": {"/countersign"}, "text": {"pending --all"}, "trigger_id": {newTrigger()}}
	code, body := e.post("/slack/commands", form, testSecret, time.Now())
	var resp commandResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusOK {
		t.Fatalf("command answered %d %s, want 200 with a JSON reply", code, body)
	}
	got := <-e.cmds
	if got.Text != "pending --all" || got.UserID != team+"/"+drSmith || got.Caller == nil || got.Caller.String() != "dr_smith [U0123ABC]" {
		t.Fatalf("chat got %+v, want pending --all from %s/%s as dr_smith [U0123ABC]", got, team, drSmith)
	}
	if resp.ResponseType != "ephemeral" || resp.Text != "ran &lt;pending --all&gt; @\u2060here" {
		t.Fatalf("answer %+v, want the reply escaped and ephemeral", resp)
	}
	// A replay of the same delivery does not run the command again.
	code, body = e.post("/slack/commands", form, testSecret, time.Now())
	if code != http.StatusOK || !strings.Contains(body, "already received") {
		t.Fatalf("replayed command answered %d %s, want 200 saying already received", code, body)
	}
	select {
	case c := <-e.cmds:
		t.Fatalf("replayed command ran (%+v), want it run once", c)
	default:
	}
	// An unmapped user reaches package chat with no caller (chat refuses).
	form.Set("user_id", stranger)
	form.Set("trigger_id", newTrigger())
	if code, _ := e.post("/slack/commands", form, testSecret, time.Now()); code != http.StatusOK {
		t.Fatal(code)
	}
	if got := <-e.cmds; got.Caller != nil || got.UserID != team+"/"+stranger {
		t.Fatalf("unmapped command reached chat as %+v, want no caller and user %s/%s", got, team, stranger)
	}
}

func TestSlashCommandUsesChatopsByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Commands = nil })
	form := url.Values{"team_id": {team}, "user_id": {drSmith}, "channel_id": {chOps}, "command": {"/countersign"}, "text": {"help"}, "trigger_id": {newTrigger()}}
	code, body := e.post("/slack/commands", form, testSecret, time.Now())
	var resp commandResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusOK {
		t.Fatalf("command answered %d %s, want 200 with a JSON reply", code, body)
	}
	want := chat.Run(context.Background(), e.bot, e.bot.Chat().Caller("slack", team+"/"+drSmith, nil), Sink, team+"/"+drSmith, "help")
	wantType := "ephemeral"
	if !want.Private {
		wantType = "in_channel"
	}
	if resp.Text != text(want.Text, maxMessageText) || resp.ResponseType != wantType {
		t.Fatalf("answer %+v, want chat's reply %+v", resp, want)
	}
}

func TestFullQueueIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.QueueSize = 1 })
	e.stop() // no worker: the queue fills
	e.wg.Wait()
	id := e.create(bot.KindAction, "ops", actionTestItem())
	e.drain()
	ref := e.ref(id)
	if code, _ := e.interact(clickPayload(drSmith, actionApprove, strconv.FormatUint(id, 10), ref, newTrigger())); code != http.StatusOK {
		t.Fatalf("first click answered %d, want 200", code)
	}
	if code, _ := e.interact(clickPayload(nurseJo, actionApprove, strconv.FormatUint(id, 10), ref, newTrigger())); code != http.StatusServiceUnavailable {
		t.Fatalf("click on a full queue: %d, want 503 (Slack then tells the user it failed)", code)
	}
}

func TestNewValidatesOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"no mode", Options{Bot: e.bot, BotToken: "x", Channels: map[string]string{"default": "C"}}, `mode ""`},
		{"http without secret", Options{Bot: e.bot, Mode: ModeHTTP, BotToken: "x", Channels: map[string]string{"default": "C"}}, "signing secret"},
		{"socket without app token", Options{Bot: e.bot, Mode: ModeSocket, BotToken: "x", Channels: map[string]string{"default": "C"}}, "app-level token"},
		{"no bot token", Options{Bot: e.bot, Mode: ModeHTTP, SigningSecret: "s", Channels: map[string]string{"default": "C"}}, "bot token"},
		{"no default channel", Options{Bot: e.bot, Mode: ModeHTTP, SigningSecret: "s", BotToken: "x"}, "default channel"},
		{"bad api url", Options{Bot: e.bot, Mode: ModeHTTP, SigningSecret: "s", BotToken: "x", APIURL: "http://x", Channels: map[string]string{"default": "C"}}, "end with '/'"},
		{"bad approver id", Options{Bot: e.bot, Mode: ModeHTTP, SigningSecret: "s", BotToken: "x", Channels: map[string]string{"default": "C"}, Approvers: []string{"U1> <!channel"}}, "not a Slack user id"},
		{"bad role member id", Options{Bot: e.bot, Mode: ModeHTTP, SigningSecret: "s", BotToken: "x", Channels: map[string]string{"default": "C"}, RoleMembers: map[string][]string{"admin": {"dr_smith"}}}, "not a Slack user id"},
	}
	for _, c := range cases {
		if _, err := New(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// TestRunPostsFromTheOutbox runs the whole adapter loop (workers, outbox).
func TestRunPostsFromTheOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Poll = 20 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.ad.Run(ctx) }()
	id := e.create(bot.KindAction, "ops", actionTestItem())
	eventually(t, "the item to be posted", func() bool { return len(refs(e.item(id))) == 1 })
	ref := e.ref(id)
	if code, _ := e.interact(clickPayload(drSmith, actionApprove, strconv.FormatUint(id, 10), ref, newTrigger())); code != http.StatusOK {
		t.Fatal(code)
	}
	eventually(t, "the message to be updated", func() bool { return len(e.fake.Calls("chat.update")) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
}
