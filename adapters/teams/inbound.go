package teams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// maxRequestBody bounds an activity; real ones are a few kilobytes.
const maxRequestBody = 256 << 10

// invokeTimeout bounds deciding a click: Teams waits a few seconds for
// the invoke's answer.
const invokeTimeout = 4 * time.Second

// teamsChannel is the Bot Framework channel id of Microsoft Teams. The
// same bot registration can be reached from other channels (Web Chat,
// Direct Line), where whoever embeds the chat says who the user is: only
// Teams' word on who clicked is taken.
const teamsChannel = "msteams"

// Handler serves POST /teams/messages, the bot's messaging endpoint.
func (a *Adapter) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST an activity here", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, "activity too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "could not read the request body", http.StatusBadRequest)
			return
		}
		// Nothing of the body is believed before the token is checked;
		// only its serviceUrl is read, to compare with the token's.
		var head struct {
			ServiceURL string `json:"serviceUrl"`
		}
		_ = json.Unmarshal(body, &head)
		if err := a.auth.check(r.Context(), r.Header.Get("Authorization"), head.ServiceURL); err != nil {
			a.log.Warn("teams request refused", "remote", r.RemoteAddr, "reason", err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if err := bot.CheckJSON("activity", body); err != nil {
			http.Error(w, "the activity is refused: "+err.Error(), http.StatusBadRequest)
			return
		}
		var act activity
		if err := json.Unmarshal(body, &act); err != nil {
			http.Error(w, "not a Bot Framework activity: "+err.Error(), http.StatusBadRequest)
			return
		}
		if act.ChannelID != teamsChannel {
			http.Error(w, fmt.Sprintf("activities are taken only from Microsoft Teams (channelId %q), not %q", teamsChannel, oneLine(act.ChannelID, 40)), http.StatusForbidden)
			return
		}
		if a.tenant != "" && !strings.EqualFold(tenantOf(act), a.tenant) {
			a.log.Warn("teams activity from another tenant refused", "tenant", oneLine(tenantOf(act), 40))
			http.Error(w, "this bot takes activities only from its own tenant (teams.tenant_id)", http.StatusForbidden)
			return
		}
		if act.From != nil {
			a.learn(act.From.AADObjectID, act.From.ID)
		}
		switch {
		case act.Type == "invoke" && act.Name == "adaptiveCard/action":
			ctx, cancel := context.WithTimeout(r.Context(), invokeTimeout)
			resp := a.invoke(ctx, act)
			cancel()
			writeJSON(w, resp)
		case act.Type == "message" && strings.TrimSpace(act.Text) != "":
			if !a.enqueue(r.Context(), func(ctx context.Context) { a.command(ctx, act) }) {
				http.Error(w, "busy; try again", http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		default:
			// Conversation updates, installs, reactions: nothing to do.
			w.WriteHeader(http.StatusOK)
		}
	})
}

// tenantOf is the Entra tenant an activity comes from.
func tenantOf(act activity) string {
	if act.ChannelData != nil && act.ChannelData.Tenant != nil && act.ChannelData.Tenant.ID != "" {
		return act.ChannelData.Tenant.ID
	}
	if act.Conversation != nil {
		return act.Conversation.TenantID
	}
	return ""
}

// invokeResponse is the answer to an adaptiveCard/action invoke: a card
// (the clicker's view of it) or a message, seen only by the clicker.
type invokeResponse struct {
	StatusCode int    `json:"statusCode"`
	Type       string `json:"type"`
	Value      any    `json:"value"`
}

const (
	typeCard    = "application/vnd.microsoft.card.adaptive"
	typeMessage = "application/vnd.microsoft.activity.message"
)

func cardResponse(c *card) invokeResponse {
	return invokeResponse{StatusCode: http.StatusOK, Type: typeCard, Value: c}
}

func messageResponse(msg string) invokeResponse {
	return invokeResponse{StatusCode: http.StatusOK, Type: typeMessage, Value: oneLine(msg, 1000)}
}

// click is what a card's action says, and who pressed it. Only ids are
// taken from it: the item is always loaded from the store.
type click struct {
	delivery string
	user     string // the Entra object id
	mri      string // the Teams user id (for the card's refresh)
	verb     string
	data     map[string]string
}

// readClick reads an adaptiveCard/action invoke.
func readClick(act activity) (click, error) {
	var v struct {
		Action struct {
			Type string                     `json:"type"`
			Verb string                     `json:"verb"`
			Data map[string]json.RawMessage `json:"data"`
		} `json:"action"`
	}
	if err := json.Unmarshal(act.Value, &v); err != nil {
		return click{}, errors.New("the action is not an Action.Execute")
	}
	if v.Action.Type != "Action.Execute" {
		return click{}, fmt.Errorf("the action %q is not an Action.Execute", oneLine(v.Action.Type, 40))
	}
	c := click{delivery: "teams:" + act.ID, verb: v.Action.Verb, data: map[string]string{}}
	if act.From != nil {
		c.user, c.mri = act.From.AADObjectID, act.From.ID
	}
	for k, raw := range v.Action.Data {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			c.data[k] = s
			continue
		}
		c.data[k] = string(raw) // a number or a boolean an input sent
	}
	return c, nil
}

// invoke answers a click: parse → decide → render.
func (a *Adapter) invoke(ctx context.Context, act activity) invokeResponse {
	c, err := readClick(act)
	if err != nil {
		return messageResponse(err.Error() + "; nothing was recorded.")
	}
	id, err := bot.ParseItemID(c.data["item"])
	if err != nil {
		return messageResponse("This button does not name a Countersign item; nothing was recorded.")
	}
	if act.ID == "" {
		return messageResponse("Teams sent this click without an activity id, so it cannot be applied exactly once; nothing was recorded. Click again.")
	}
	d := chat.Decision{Surface: bot.SurfaceTeams, UserID: c.user, Deliveries: []string{c.delivery}, ItemID: id, Seen: seenOf(c.data)}
	switch c.verb {
	case verbRefresh:
		return a.refreshed(ctx, c, id)
	case verbDetails:
		// The folded detail (and a sensitive item's fields) for someone
		// who may read them: chat.ShowDetails decides, and audits a
		// sensitive item's view.
		d.Deliveries, d.Verb = nil, chat.ViewDetails
		out := chat.ShowDetails(ctx, a.bot, d)
		if out.Status != chat.Ready {
			return a.render(ctx, c, out)
		}
		return cardResponse(a.viewFor(out.Item, out.Caller, c, true, "", ""))
	case verbApprove:
		d.Verb, d.Basis = chat.Approve, c.data["basis"]
		if it, err := a.bot.Items().Get(ctx, id); err == nil && it.Pending() && it.Danger != nil {
			// The second step first: nothing is decided yet, so the
			// delivery is not used up. Someone the one rule refuses gets
			// the refusal (audited) from Decide instead.
			prep := d
			prep.Deliveries = nil
			out := chat.Prepare(ctx, a.bot, prep)
			if out.Status != chat.Ready {
				return a.render(ctx, c, out)
			}
			if _, readOnly := a.bot.Items().ReadOnly(out.Caller, out.Item); !readOnly && (out.Item.StepUp <= 0 || out.Caller.SteppedUp(out.Item.StepUp, a.bot.Now())) {
				return cardResponse(confirmCard(out.Item))
			}
		}
	case verbConfirm:
		// The second step was passed: this button is only on confirmCard.
		d.Verb, d.Basis, d.Confirmed = chat.Approve, c.data["basis"], true
	case verbGrant:
		d.Verb, d.Grant = chat.Approve, &bot.GrantChoice{Kind: c.data["grant"], For: c.data["for"]}
		out := chat.Decide(ctx, a.bot, d)
		if out.Status == chat.Decided && out.Reply != "" {
			return cardResponse(a.viewFor(out.Item, out.Caller, c, false, out.Reply, colorGood))
		}
		return a.render(ctx, c, out)
	case verbReject:
		// Prepare dedupes the delivery as Slack's and Discord's Reject do:
		// a refused Reject delivered again is not audited twice.
		d.Verb = chat.Reject
		out := chat.Prepare(ctx, a.bot, d)
		if out.Status != chat.Ready {
			return a.render(ctx, c, out)
		}
		return cardResponse(reasonCard(out.Item, ""))
	case verbRejectSubmit:
		d.Verb, d.Reason = chat.Reject, strings.TrimSpace(c.data[inputReason])
		if len([]rune(d.Reason)) > maxReason {
			if it, err := a.bot.Items().Get(ctx, id); err == nil {
				return cardResponse(reasonCard(it, fmt.Sprintf("Keep the reason to %d characters.", maxReason)))
			}
		}
	case verbEdit:
		d.Deliveries, d.Verb = nil, chat.Approve
		out := chat.PrepareEdit(ctx, a.bot, d)
		if out.Status != chat.Ready {
			return a.render(ctx, c, out)
		}
		lay, why := chat.EditForm(out.Item, maxEditInput, maxEditText)
		if why != "" {
			return cardResponse(a.viewFor(out.Item, out.Caller, c, false, why, colorAttention))
		}
		return cardResponse(editCard(out.Item, lay, nil, ""))
	case verbEditSubmit:
		return a.editSubmitted(ctx, c, d)
	case verbAnswer:
		d.Verb, d.Choices = chat.Answer, []int{choiceIndex(c.data["option"])}
	case verbAnswerMulti:
		d.Verb = chat.Answer
		for _, v := range strings.Split(c.data[inputChoices], ",") {
			if v = strings.TrimSpace(v); v != "" {
				d.Choices = append(d.Choices, choiceIndex(v))
			}
		}
	default:
		return messageResponse("Countersign does not know this button; nothing was recorded.")
	}
	return a.render(ctx, c, chat.Decide(ctx, a.bot, d))
}

// choiceIndex reads an option index; anything else is -1, which the
// decision layer refuses.
func choiceIndex(v string) int {
	i, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return -1
	}
	return i
}

// refreshed is the clicker's view of the card, which their Teams client
// asks for when it shows the card: with the buttons only when the one
// rule lets them decide the item. It decides nothing.
func (a *Adapter) refreshed(ctx context.Context, c click, id uint64) invokeResponse {
	it, err := a.bot.Items().Get(ctx, id)
	if err != nil {
		return messageResponse(fmt.Sprintf("No item #%d.", id))
	}
	caller := a.bot.Chat().Caller(bot.SurfaceTeams, c.user, nil)
	if caller == nil || !caller.InScope(it.Space.UserID) {
		// Nothing beyond the shared card, which the channel shows anyway.
		return cardResponse(itemCard(it, view{}, nil))
	}
	return cardResponse(a.viewFor(it, caller, c, false, "", ""))
}

// viewFor is the card of it as caller may see it now: the buttons while
// pending when the one rule lets them decide, a sensitive item's fields
// when details is set (after chat.ShowDetails), the folded Details when
// they may read the item, and notice on top.
func (a *Adapter) viewFor(it bot.Item, caller *bot.Caller, c click, details bool, notice, color string) *card {
	v := view{notice: notice, noticeColor: color, details: details && (caller != nil && caller.MaySeeDetails(it))}
	v.folded = caller.MayRead() && caller.InScope(it.Space.UserID) && (!it.Sensitive || v.details)
	_, readOnly := a.bot.Items().ReadOnly(caller, it)
	v.buttons = it.Pending() && caller != nil && !readOnly
	var ids []string
	if it.Pending() && c.mri != "" {
		ids = []string{c.mri} // their own card keeps refreshing for them
	}
	return itemCard(it, v, ids)
}

// render turns a decision's outcome into the clicker's answer. A decided
// item's card is the outcome itself (the shared card is replaced from the
// outbox too); anything else is said on the clicker's view of the card,
// or, when there is no item they may see, as a message.
func (a *Adapter) render(ctx context.Context, c click, out chat.Outcome) invokeResponse {
	switch out.Status {
	case chat.Decided:
		return cardResponse(a.viewFor(out.Item, out.Caller, c, false, out.Reply, colorGood))
	case chat.Counted:
		cd := a.viewFor(out.Item, out.Caller, c, false, out.Reply, colorGood)
		cd.Actions = withoutDecisions(cd.Actions)
		return cardResponse(cd)
	}
	if out.Status == chat.Duplicate {
		a.log.Info("duplicate delivery", "item", out.Item.ID, "user", oneLine(c.user, 64))
	}
	if out.Item.ID == 0 || out.Caller == nil {
		return messageResponse(out.Reply)
	}
	return cardResponse(a.viewFor(out.Item, out.Caller, c, false, out.Reply, colorAttention))
}

// withoutDecisions drops the decision buttons (a vote counted), keeping
// the console link.
func withoutDecisions(acts []any) []any {
	var out []any
	for _, x := range acts {
		if _, ok := x.(openURL); ok {
			out = append(out, x)
		}
	}
	return out
}

// editSubmitted decides a submitted edit form; a problem with what was
// typed comes back on the form, with what the person typed.
func (a *Adapter) editSubmitted(ctx context.Context, c click, d chat.Decision) invokeResponse {
	d.Verb, d.Basis = chat.Approve, c.data["basis"]
	d.Reason = strings.TrimSpace(c.data[inputNote])
	it, err := a.bot.Items().Get(ctx, d.ItemID)
	if err != nil {
		return a.render(ctx, c, chat.Prepare(ctx, a.bot, d))
	}
	lay, why := chat.EditForm(it, maxEditInput, maxEditText)
	if why != "" {
		out := chat.Prepare(ctx, a.bot, chat.Decision{Surface: d.Surface, UserID: d.UserID, ItemID: d.ItemID, Verb: chat.Approve})
		if out.Status == chat.Ready {
			return cardResponse(a.viewFor(it, out.Caller, c, false, why, colorAttention))
		}
		return a.render(ctx, c, out)
	}
	if len([]rune(d.Reason)) > maxReason {
		return cardResponse(editCard(it, lay, c.data, fmt.Sprintf("Keep the note to %d characters.", maxReason)))
	}
	byName := map[string]string{}
	for i, in := range lay.Inputs {
		if v, ok := c.data[inputEdit+strconv.Itoa(i)]; ok {
			byName[in.Name] = v
		}
	}
	if field, msg := lay.Apply(&d, byName); field != "" {
		return cardResponse(editCard(it, lay, c.data, fieldName(field)+msg))
	}
	out := chat.Decide(ctx, a.bot, d)
	if out.Status == chat.Invalid && out.Item.ID != 0 {
		return cardResponse(editCard(out.Item, lay, c.data, fieldName(out.Field)+out.Reply))
	}
	return a.render(ctx, c, out)
}

// fieldName introduces a form error with the input it is about.
func fieldName(f string) string {
	f = strings.TrimPrefix(f, "arguments.")
	if f == "" || f == chat.ArgumentsInput {
		return ""
	}
	return bot.OneLine(f, 40) + ": "
}

// mention matches a Teams mention in a message's text.
var mention = regexp.MustCompile(`(?is)<at>.*?</at>`)

// commandText is what a person typed to the bot, without the mention of
// the bot and without a leading "countersign" or "/countersign".
func commandText(text string) string {
	t := strings.TrimSpace(mention.ReplaceAllString(text, " "))
	for _, p := range []string{"/countersign", "countersign"} {
		if len(t) >= len(p) && strings.EqualFold(t[:len(p)], p) && (len(t) == len(p) || t[len(p)] == ' ') {
			t = strings.TrimSpace(t[len(p):])
			break
		}
	}
	return t
}

// command runs a typed command through package chat as the mapped
// principal (nil if unmapped: chat refuses and audits) and answers: in a
// personal chat there; a private answer to a command typed in a channel
// or a group chat in the person's personal chat with the bot.
func (a *Adapter) command(ctx context.Context, act activity) {
	if act.ID != "" {
		first, err := a.bot.Deliveries().First(ctx, "teams:"+act.ID)
		if err != nil || !first {
			if err != nil {
				a.log.Error("delivery dedupe failed; command dropped", "activity", act.ID, "err", err)
			}
			return
		}
	}
	if act.From == nil || act.Conversation == nil {
		return
	}
	who := act.From.AADObjectID
	reply := a.commands(ctx, a.bot.Chat().Caller(bot.SurfaceTeams, who, nil), who, commandText(act.Text))
	msg := cut(clean(reply.Text, 0), 20000)
	if strings.TrimSpace(msg) == "" {
		msg = "(no answer)"
	}
	out := activity{Type: "message", Text: msg, TextFormat: "plain"}
	conv := act.Conversation.ID
	var err error
	switch {
	case act.Conversation.ConversationType == "personal" || act.Conversation.ConversationType == "":
		_, err = a.api.reply(ctx, conv, act.ID, out)
	case reply.Private:
		botID := ""
		if act.Recipient != nil {
			botID = act.Recipient.ID
		}
		var dm string
		if dm, err = a.api.personal(ctx, botID, act.From.ID, tenantOf(act)); err == nil {
			_, err = a.api.send(ctx, dm, out)
		}
	default:
		_, err = a.api.reply(ctx, conv, act.ID, out)
	}
	if err != nil {
		a.log.Warn("answer to a command not delivered", "activity", act.ID, "err", err)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
