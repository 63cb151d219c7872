package chat

// This file runs the chat commands (/countersign pending, show,
// approve, reject, history, check, help) behind the deterministic scope gate
// (Scope).
//
// Every message goes through the gate first. A well-formed command runs; a
// greeting, a capability question, an informational question or unknown
// in-lane text gets the help; free text that reads like a decision ("yes",
// "approve it") is told that it decided nothing; an out-of-lane request gets
// the gate's refusal, which names who does the thing instead.
//
// A decision is taken only by the exact command "approve <id>" or
// "reject <id> <reason>" from a chat user mapped to a principal, through
// bot.Decide: the same tool handler, capability check and audit entry as an
// API client's call. Every reply is private to the person who typed the command,
// because a channel may be shared.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// Reply is the answer to a chat command.
type Reply struct {
	Text    string // plain text; the adapter escapes it for its surface
	Private bool   // show only to the user who typed the command
}

// Limits of what one reply lists.
const (
	// listLimit is how many pending items one reply lists (Discord caps a
	// message at 2000 characters); `pending after <id>` lists the next.
	listLimit = 20
	// titleRunes and valueRunes cap one line of untrusted text.
	titleRunes = 90
	valueRunes = 300
)

// Tool names the commands call.
const (
	toolHistory = "history"
	toolCheck   = "check_before_act"
)

// Run executes one chat command typed by a chat user. caller is the
// principal the chat user is mapped to, or nil if unmapped. surface is
// "slack" or "discord"; chatUserID is the platform user id.
func Run(ctx context.Context, b *bot.Bot, caller *bot.Caller, surface, chatUserID, text string) Reply {
	s := session{b: b, caller: caller, surface: surface, user: chatUserID}
	v := Scope(text)
	b.Logger().Info("chat message",
		"surface", surface, "chat_user", bot.OneLine(chatUserID, 64), "principal", s.principal(),
		"verdict", string(v.Kind), "command", v.Command.Name, "families", v.Families)
	return Reply{Text: s.answer(ctx, v), Private: true}
}

// session is one chat user's command.
type session struct {
	b       *bot.Bot
	caller  *bot.Caller // nil when unmapped
	surface string
	user    string
}

func (s session) principal() string {
	if s.caller == nil {
		return ""
	}
	return s.caller.String()
}

// answer turns the gate's verdict into the reply text.
func (s session) answer(ctx context.Context, v ScopeVerdict) string {
	switch v.Kind {
	case ScopeCommand:
		return s.command(ctx, v.Command)
	case ScopeGreeting:
		return "Hi, I'm Countersign. " + laneStatement + "\n\nType `help` to see the commands."
	case ScopeCapability:
		return s.help()
	case ScopeQuestion:
		if len(v.Families) > 0 {
			return "I don't carry out actions myself — that's by design. " + handoffs(v.Families) + "\n\n" + s.help()
		}
		return s.help()
	case ScopeUsage:
		return usage(v.Command)
	case ScopeNotADecision:
		return notADecision(v.Command)
	case ScopeTooLong:
		return fmt.Sprintf("That message is longer than %d bytes, so I did nothing with it. Type `help` to see the commands.", maxChatText)
	case ScopeOutOfLane:
		if v.Negated {
			return negatedRefusal(v.Families)
		}
		return gateRefusal(v.Families)
	default: // ScopeUnknown
		return "I didn't recognise that, so I did nothing with it.\n\n" + s.help()
	}
}

func (s session) command(ctx context.Context, c ChatCommand) string {
	switch c.Name {
	case CmdPending:
		return s.pending(ctx, c.ID)
	case CmdShow:
		return s.show(ctx, c.ID)
	case CmdApprove:
		if ids := c.batchIDs(); len(ids) > 1 {
			return s.batch(ctx, ids)
		}
		return s.decide(ctx, c.ID, true, "", c.Version, c.Confirm)
	case CmdReject:
		return s.decide(ctx, c.ID, false, c.Reason, "", "")
	case CmdHistory:
		return s.tool(ctx, CmdHistory, toolHistory, c.Subject, c.Space)
	case CmdCheck:
		return s.tool(ctx, CmdCheck, toolCheck, c.Subject, c.Space)
	case CmdWeb:
		return s.web(ctx)
	case CmdGrants:
		return s.grants(ctx)
	case CmdRevokeGrant:
		return s.revokeGrant(ctx, c.ID)
	case CmdDelegate:
		return s.delegate(ctx, c)
	default: // CmdHelp
		return s.help()
	}
}

// help is the command list and the lane statement.
func (s session) help() string {
	var b strings.Builder
	b.WriteString("Countersign: " + laneStatement + "\n\n")
	b.WriteString("Commands (type them after /countersign):\n")
	b.WriteString("  pending — what awaits a decision, soonest to expire first (`pending after <id>`: the next page)\n")
	b.WriteString("  show <id> — one item: what is asked, its fields, its version, its status and who decided\n")
	b.WriteString("  approve <id> [version] — approve an item (people whose role holds approve); an edited request needs the version `show` gives\n")
	b.WriteString("  approve <id> <id>… — approve several pending items of the same tool and rule at once, each decided on its own (not destructive ones, stages or a quorum)\n")
	b.WriteString("  approve <id> confirm <name> — approve an item that cannot be undone, typing the name of what it acts on\n")
	b.WriteString("  reject <id> <reason> — reject an item, saying why (people whose role holds approve)\n")
	b.WriteString("  history <subject> [space] — every value a memory subject has held\n")
	b.WriteString("  check <subject> [space] — is it safe to act on a memory subject: SAFE or BLOCKED\n")
	b.WriteString("  grants — the standing grants in force (what is approved at once, for which agent, until when)\n")
	b.WriteString("  revoke-grant <n> — revoke grant #n at once (people whose role holds approve)\n")
	b.WriteString("  delegate @<person> until <18:00|2026-12-03 09:00> (or for <4h>) — lend your approvals while you are away, where you both may decide; `delegate off` ends it, `delegate` shows what runs\n")
	b.WriteString("  web — a private link that signs you in to the web console (once, within 5 minutes)\n")
	b.WriteString("  help — this message\n")
	b.WriteString("The space is the memory space's user_id (default \"default\"). ")
	b.WriteString("Only you see my replies. A decision is only ever `approve <id>`, `reject <id> <reason>` or a button, from a person mapped to a principal; a \"yes\" typed in a channel decides nothing.")
	if s.caller == nil {
		b.WriteString("\n\n" + unmappedNote(s.surface, s.user))
	} else {
		fmt.Fprintf(&b, "\n\nYou act as %s (role %s).", bot.OneLine(s.caller.Name, 64), s.caller.Role)
	}
	return b.String()
}

func usage(c ChatCommand) string {
	switch c.Name {
	case CmdPending:
		return "Type `pending` on its own to list what awaits a decision, or `pending after <id>` for the items after #<id>, for example `pending after 12`."
	case CmdWeb:
		return "`web` takes nothing after it: type `web` on its own to get a private sign-in link to the web console."
	case CmdGrants:
		return "`grants` takes nothing after it: type `grants` on its own to list the standing grants in force."
	case CmdRevokeGrant:
		return "Usage: `revoke-grant <n>`, for example `revoke-grant 4` for grant #4. `grants` lists them."
	case CmdDelegate:
		return "Usage: `delegate @bob until 18:00` (UTC), `delegate bob until 2026-12-03 09:00`, `delegate bob for 4h`, `delegate off`, or `delegate` on its own to see what runs. A delegation runs at most 14 days."
	case CmdShow:
		return "Usage: `show <id>`, for example `show 12`. `pending` lists the ids."
	case CmdApprove:
		return fmt.Sprintf("`approve` takes one item id, and for an edited request the version `show %d` gives, so I did nothing. To approve #%d, type `approve %d` (or `approve %d <version>`).", c.ID, c.ID, c.ID, c.ID)
	case CmdReject:
		return fmt.Sprintf("A rejection needs a reason, so the agent knows why; I did nothing. Type `reject %d <reason>`, for example `reject %d dose too high`.", c.ID, c.ID)
	case CmdHistory:
		return "Usage: `history <subject> [space]`, for example `history active_medication patient_42`. The space is the memory space's user_id; it defaults to \"default\"."
	case CmdCheck:
		return "Usage: `check <subject> [space]`, for example `check active_medication patient_42`. The space is the memory space's user_id; it defaults to \"default\"."
	default:
		return "Type `help` to see the commands."
	}
}

// notADecision answers free text that reads like a decision.
func notADecision(hint ChatCommand) string {
	msg := "That isn't a decision: I never take one from conversation text, so nothing was approved or rejected. " +
		"A person whose role holds approve decides with the buttons on the item, or by typing `approve <id>` or `reject <id> <reason>` on its own; `pending` lists the ids."
	switch {
	case hint.Name == CmdApprove && hint.ID != 0:
		msg += fmt.Sprintf(" To approve #%d, type `approve %d`.", hint.ID, hint.ID)
	case hint.Name == CmdReject && hint.ID != 0:
		msg += fmt.Sprintf(" To reject #%d, type `reject %d <reason>`.", hint.ID, hint.ID)
	}
	return msg
}

// mapped reports whether the user is mapped to a principal. If not, it
// audits the attempt and returns the refusal.
func (s session) mapped(ctx context.Context, what string) (string, bool) {
	if s.caller != nil {
		return "", true
	}
	if err := s.b.Chat().Deny(ctx, s.surface, s.user, fmt.Sprintf("%s refused: %s user %s is not mapped to a principal", what, s.surface, bot.OneLine(s.user, 64))); err != nil {
		s.b.Logger().Error("chat: auditing a refused command failed; the refusal stands", "surface", s.surface, "err", err)
	}
	return fmt.Sprintf("Access denied: I can't run `%s` for you. %s", what, unmappedNote(s.surface, s.user)), false
}

// audit appends an entry as the mapped caller (a refusal, or a view of
// sensitive detail).
func (s session) audit(ctx context.Context, sp bot.Space, action, detail string) error {
	return s.b.Chat().Audit(ctx, s.caller, sp, action, detail)
}

// canRead checks that the mapped caller's role may read items; a refusal is
// audited.
func (s session) canRead(ctx context.Context, what string) (string, bool) {
	if policy.Grants(s.caller.Role, policy.CapRead) {
		return "", true
	}
	msg := policy.DenyCapability(what, policy.CapRead, s.caller.Role)
	if err := s.audit(ctx, bot.Space{}, "access_denied", s.surface+": "+msg); err != nil {
		s.b.Logger().Error("chat: auditing a refused command failed; the refusal stands", "surface", s.surface, "err", err)
	}
	return msg, false
}

// pending lists the items that await a decision and that the person may
// see (their scopes), soonest to expire first, listLimit at a time: after
// is the last item of the previous page (0: the first page). The store is
// asked for exactly those items, so that nobody else's requests can push
// them out of the list.
func (s session) pending(ctx context.Context, after uint64) string {
	if msg, ok := s.mapped(ctx, CmdPending); !ok {
		return msg
	}
	if msg, ok := s.canRead(ctx, CmdPending); !ok {
		return msg
	}
	page, err := s.b.Items().Queue(ctx, s.caller, bot.QueueQuery{After: after, Limit: listLimit})
	var be *bot.Error
	if errors.As(err, &be) && be.Kind == bot.KindInvalid {
		return be.Msg + ". Type `pending` for the first page."
	}
	if err != nil {
		s.b.Logger().Error("chat: listing pending items failed", "err", err)
		return couldNotComplete
	}
	var b strings.Builder
	switch {
	case after != 0 && len(page.Items) == 0:
		fmt.Fprintf(&b, "Nothing after #%d awaits a decision. Type `pending` for the first page.", after)
	case after != 0:
		fmt.Fprintf(&b, "Awaiting a decision after #%d, soonest to expire first:", after)
	default:
		facets, err := s.b.Items().Facets(ctx, s.caller, "")
		if err != nil {
			s.b.Logger().Error("chat: counting pending items failed", "err", err)
			return couldNotComplete
		}
		n, capped := 0, false
		for k, c := range facets.Kinds {
			n += c
			capped = capped || facets.Capped[k]
		}
		if page.Next == 0 {
			n, capped = len(page.Items), false // all of them: exact
		}
		switch {
		case len(page.Items) == 0:
			b.WriteString("Nothing awaits a decision.")
		case capped:
			fmt.Fprintf(&b, "More than %d items await a decision, soonest to expire first:", n)
		case n == 1:
			b.WriteString("1 item awaits a decision:")
		default:
			fmt.Fprintf(&b, "%d items await a decision, soonest to expire first:", n)
		}
	}
	now := s.b.Now()
	for _, it := range page.Items {
		b.WriteString("\n• " + listLine(it, s.caller.MaySeeDetails(it), now))
	}
	if page.Next != 0 {
		fmt.Fprintf(&b, "\n… more: type `pending after %d` for the next ones.", page.Next)
	}
	if len(page.Items) > 0 {
		b.WriteString("\nDecide with the buttons on each item, or type `approve <id>` or `reject <id> <reason>`; `show <id>` gives the details.")
	}
	return b.String()
}

// listLine is one pending item on one line. A sensitive item's title is
// shown only with details (Caller.MaySeeDetails).
func listLine(it bot.Item, details bool, now time.Time) string {
	title := bot.OneLine(it.Title, titleRunes)
	if it.Sensitive && !details {
		title = "(details withheld: sensitive)"
	}
	if title == "" {
		title = "(untitled)"
	}
	if it.Danger != nil {
		title = "⚠ cannot be undone: " + title
	}
	line := fmt.Sprintf("#%d %s — %s", it.ID, KindNoun(it.Kind), title)
	var notes []string
	if it.Space.UserID != "" {
		notes = append(notes, "space "+bot.OneLine(it.Space.UserID, 40))
	}
	if it.Tally != "" {
		notes = append(notes, bot.OneLine(it.Tally, 60))
	}
	if !it.ExpiresAt.IsZero() {
		if it.ExpiresAt.After(now) {
			notes = append(notes, "expires in "+RoundDuration(it.ExpiresAt.Sub(now)))
		} else {
			notes = append(notes, "expiry due")
		}
	}
	if len(notes) > 0 {
		line += " (" + strings.Join(notes, "; ") + ")"
	}
	return line
}

// show renders one item. A sensitive item's detail is shown only to
// approvers, and showing it is audited.
func (s session) show(ctx context.Context, id uint64) string {
	if msg, ok := s.mapped(ctx, CmdShow); !ok {
		return msg
	}
	if msg, ok := s.canRead(ctx, CmdShow); !ok {
		return msg
	}
	it, err := s.b.Items().Get(ctx, id)
	if errors.Is(err, bot.ErrNoItem) {
		return fmt.Sprintf("No item #%d. `pending` lists the items awaiting a decision.", id)
	}
	if err != nil {
		s.b.Logger().Error("chat: reading an item failed", "item", id, "err", err)
		return couldNotComplete
	}
	if !policy.InScope(s.caller.Role, s.caller.Scopes, it.Space.UserID) {
		msg := policy.DenyScope(CmdShow)
		if err := s.audit(ctx, it.Space, "access_denied", fmt.Sprintf("%s: %s (#%d)", s.surface, msg, id)); err != nil {
			s.b.Logger().Error("chat: auditing a refused command failed; the refusal stands", "surface", s.surface, "err", err)
		}
		return msg
	}
	detail := s.caller.MaySeeDetails(it)
	if it.Sensitive && detail {
		if err := s.audit(ctx, it.Space, "view_sensitive", fmt.Sprintf("%s: details of #%d shown privately (show)", s.surface, id)); err != nil {
			s.b.Logger().Error("chat: auditing a sensitive view failed; details withheld", "item", id, "err", err)
			return couldNotComplete
		}
	}
	return renderItem(it, detail, s.b.Now())
}

// renderItem is the private text of one item. Every string from the item is
// untrusted: each is put on one line and capped.
func renderItem(it bot.Item, detail bool, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s — %s\n", it.ID, KindNoun(it.Kind), it.Status)
	if !detail {
		b.WriteString("The details of this sensitive item are shown only to its requester and to people who may decide in its space.")
		if len(it.DecidedBy) > 0 {
			b.WriteString("\nDecided by: " + joinLine(it.DecidedBy, 400))
		}
		return b.String()
	}
	if it.Danger != nil && it.Pending() {
		b.WriteString(bot.OneLine(it.Danger.Warning, 300) + "\n")
	}
	if t := bot.OneLine(it.Title, 200); t != "" {
		b.WriteString(t + "\n")
	}
	if line := ReopenedLine(it); line != "" && it.Pending() {
		b.WriteString(line + "\n")
	}
	if label := EffectLabel(it); label != "" {
		b.WriteString(label + " " + bot.OneLine(it.Effect, 600) + "\n")
	}
	if len(it.Facts) > 0 {
		b.WriteString(FactsHeading(it) + "\n")
		for _, f := range it.Facts {
			b.WriteString("  • " + FactLine(f) + "\n")
		}
	}
	if len(it.Args) > 0 {
		b.WriteString(ArgsLabel + "\n")
		for _, a := range it.Args {
			b.WriteString("  " + argLine(a) + "\n")
		}
	}
	space := spaceLine(it.Space)
	for _, f := range it.Fields {
		v := bot.OneLine(f.Value, valueRunes)
		if strings.TrimSpace(v) == "" || (f.Label == "Space" && space != "") {
			continue // no "Source:" with nothing after it; the Space line is above
		}
		fmt.Fprintf(&b, "  %s: %s\n", bot.OneLine(f.Label, 60), v)
	}
	if it.Asked != "" {
		b.WriteString(AskedLabel + " " + bot.OneLine(it.Asked, 600) + "\n")
	}
	if sp := spaceLine(it.Space); sp != "" {
		b.WriteString("Space: " + sp + "\n")
	}
	if it.Requester != "" {
		b.WriteString("Requested by: " + NameOf(it.Requester))
		if !it.CreatedAt.IsZero() {
			b.WriteString(" on " + Stamp(it.CreatedAt))
		}
		b.WriteString("\n")
	} else if !it.CreatedAt.IsZero() {
		b.WriteString("Created: " + Stamp(it.CreatedAt) + "\n")
	}
	if it.Pending() && !it.ExpiresAt.IsZero() {
		b.WriteString("Expires: " + Stamp(it.ExpiresAt))
		if it.ExpiresAt.After(now) {
			b.WriteString(" (in " + RoundDuration(it.ExpiresAt.Sub(now)) + ")")
		}
		b.WriteString("\n")
	}
	if it.Tally != "" {
		b.WriteString("Tally: " + bot.OneLine(it.Tally, 200) + "\n")
	}
	if len(it.Options) > 0 {
		b.WriteString("Options: " + joinLine(it.Options, 400))
		if it.Multi {
			b.WriteString(" (choose one or more)")
		}
		b.WriteString("\n")
	}
	if len(it.DecidedBy) > 0 {
		b.WriteString("Decided by: " + joinNames(it.DecidedBy, 400))
		if !it.DecidedAt.IsZero() {
			b.WriteString(" on " + Stamp(it.DecidedAt))
		}
		b.WriteString("\n")
	}
	if it.Reason != "" {
		b.WriteString("Reason: " + bot.OneLine(it.Reason, 500) + "\n")
	}
	if it.Pending() && it.Kind == bot.KindAction && it.Version != "" {
		b.WriteString("Version: " + it.Version + "\n")
	}
	if len(it.Details) > 0 || len(it.Votes) > 0 {
		b.WriteString(strings.ReplaceAll(DetailsText(it), "\n•", "\n  •") + "\n")
	}
	if it.Pending() && it.Danger != nil {
		fmt.Fprintf(&b, "Decide with the buttons on the item, or type `approve %d confirm %s` or `reject %d <reason>`.", it.ID, bot.OneLine(it.Danger.Target, 100), it.ID)
		return strings.TrimRight(b.String(), "\n")
	}
	if it.Pending() {
		approve := fmt.Sprintf("`approve %d`", it.ID)
		if it.Revised {
			// Edited since it was created: an approval names the version.
			approve = fmt.Sprintf("`approve %d %s`", it.ID, it.Version)
		}
		fmt.Fprintf(&b, "Decide with the buttons on the item, or type %s or `reject %d <reason>`.", approve, it.ID)
	}
	return strings.TrimRight(b.String(), "\n")
}

// decide takes a decision on item id through Decide, the decision layer
// every surface uses. The reply names the item by its chat number only,
// and a decision on an item already decided answers with what was
// recorded.
func (s session) decide(ctx context.Context, id uint64, approve bool, reason, version, confirm string) string {
	return s.decideIn(ctx, id, approve, reason, version, confirm, "")
}

// decideIn is decide as one approval of a batch (Decision.Batch); batch
// "" is a decision on its own.
func (s session) decideIn(ctx context.Context, id uint64, approve bool, reason, version, confirm, batch string) string {
	verb := Approve
	if !approve {
		verb = Reject
	}
	if msg, ok := s.mapped(ctx, fmt.Sprintf("%s #%d", verb, id)); !ok {
		return msg
	}
	out := Decide(ctx, s.b, Decision{Surface: s.surface, UserID: s.user, Caller: s.caller, ItemID: id, Verb: verb, Reason: reason, ArgsSHA256: version, Confirm: confirm, Batch: batch})
	switch out.Status {
	case Decided:
		icon, word := StatusWord(out.Item.Status)
		line := fmt.Sprintf("%s %s #%d (%s): %s", icon, word, out.Item.ID, KindNoun(out.Item.Kind), bot.OneLine(itemTitle(out.Item, true), titleRunes))
		if out.Item.Effect != "" && !out.Item.Sensitive {
			line += "\n" + EffectLabel(out.Item) + " " + bot.OneLine(out.Item.Effect, 400)
		}
		return line
	case Counted:
		return out.Reply
	case Invalid:
		if dg := out.Item.Danger; out.Field == ConfirmField && dg != nil {
			lead := fmt.Sprintf("#%d cannot be undone (%s), so approving it takes a confirmation; nothing was recorded.", id, bot.OneLine(dg.Confirm, 200))
			if confirm != "" {
				lead = fmt.Sprintf("%q is not the %s of #%d; nothing was recorded.", bot.OneLine(confirm, 100), bot.OneLine(dg.TargetLabel, 60), id)
			}
			return lead + fmt.Sprintf(" To approve it, type `approve %d confirm %s` (its %s).", id, bot.OneLine(dg.Target, 100), bot.OneLine(dg.TargetLabel, 60))
		}
	}
	if out.Reply == "" {
		return couldNotDecide
	}
	return out.Reply
}

// itemTitle is an item's title for a reply; a sensitive item's is shown
// only when detail is set.
func itemTitle(it bot.Item, detail bool) string {
	if it.Sensitive && !detail {
		return "(details withheld: sensitive)"
	}
	if it.Title == "" {
		return "(untitled)"
	}
	return it.Title
}

// web answers privately with a one-time, 5-minute sign-in link to the web
// console for the mapped person. The reply is private (every command reply
// is), so the link reaches only the person who asked.
func (s session) web(ctx context.Context) string {
	if msg, ok := s.mapped(ctx, CmdWeb); !ok {
		return msg
	}
	link, err := s.b.WebLinks().SignIn(s.caller)
	if errors.Is(err, bot.ErrNoWebConsole) {
		return "The web console is off here (web.enabled: false in Countersign's config.yaml), so there is no link to give."
	}
	if err != nil {
		s.b.Logger().Warn("chat: minting a web sign-in link failed", "principal", s.principal(), "err", err)
		return "I couldn't make a sign-in link for you: " + bot.OneLine(err.Error(), 200) + ". Ask a Countersign admin."
	}
	if err := s.audit(ctx, bot.Space{}, "web_link_issued", s.surface+": one-time web sign-in link sent privately"); err != nil {
		s.b.Logger().Error("chat: auditing a web link failed; no link given", "err", err)
		return couldNotComplete
	}
	return "Your sign-in link to the Countersign web console (only you see this; it works once, within 5 minutes):\n" + link
}

// tool runs a read tool (history, check_before_act) for the mapped caller
// through b.Call, which checks the capability and the space's scope.
func (s session) tool(ctx context.Context, command, tool, subject, space string) string {
	if msg, ok := s.mapped(ctx, command); !ok {
		return msg
	}
	if !hasTool(s.b, tool) {
		return fmt.Sprintf("`%s` is not available: this Countersign runs without the memory tools.", command)
	}
	if space == "" {
		space = "default"
	}
	raw, err := json.Marshal(map[string]string{"subject": subject, "user_id": space})
	if err != nil {
		return s.failure(err, couldNotComplete, "encoding tool arguments", "tool", tool)
	}
	res, err := s.b.Call(ctx, s.caller, tool, raw)
	if err != nil {
		return s.failure(err, couldNotComplete, "calling a tool", "tool", tool)
	}
	return res.Text
}

// failure turns an error into the private reply: a *bot.Error's message as
// it is (the "Access denied" wording intact); anything else is logged and
// answered with generic.
func (s session) failure(err error, generic, what string, attrs ...any) string {
	var be *bot.Error
	if errors.As(err, &be) && be.Kind != bot.KindInternal {
		return be.Error()
	}
	s.b.Logger().Error("chat: "+what+" failed", append(attrs, "err", err)...)
	return generic
}

func hasTool(b *bot.Bot, name string) bool {
	for _, t := range b.Tools() {
		if t.Name == name {
			return true
		}
	}
	return false
}

// spaceLine is the space's one label (Space.Label), sanitised; "" for no
// space.
func spaceLine(sp bot.Space) string {
	if sp == (bot.Space{}) {
		return ""
	}
	return bot.OneLine(sp.Label(), 400)
}

// RoundDuration renders a positive duration coarsely: "45s", "25m",
// "3h10m", "2d4h". Every surface says "in 25m" the same way.
func RoundDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	default:
		days := int(d.Hours()) / 24
		if h := int(d.Hours()) % 24; h != 0 {
			return fmt.Sprintf("%dd%dh", days, h)
		}
		return fmt.Sprintf("%dd", days)
	}
}

// batch approves several items at once ("approve 12 13 14"): every one
// must pass the batch rule (CheckBatch: pending, visible, of one batch),
// else nothing is decided. Each is then decided on its own through
// Decide, so the one rule, the scope and the audit apply to each.
func (s session) batch(ctx context.Context, ids []uint64) string {
	if msg, ok := s.mapped(ctx, fmt.Sprintf("%s %d items", Approve, len(ids))); !ok {
		return msg
	}
	_, batch, err := CheckBatch(ctx, s.b, s.caller, ids)
	var br *BatchRefusal
	switch {
	case errors.As(err, &br) && br.Problem == BatchHidden:
		return fmt.Sprintf("#%d is not an item you can see, so I approved none of them. `pending` lists yours.", br.ID)
	case errors.As(err, &br) && br.Problem == BatchDecided:
		return fmt.Sprintf("#%d is already decided, so I approved none of them. Approve the others again without it.", br.ID)
	case errors.As(err, &br) && br.Problem == BatchIneligible:
		return fmt.Sprintf("%s, so I approved none of them. Approve it on its own: `approve %d`.", br.Error(), br.ID)
	case errors.As(err, &br):
		return br.Error() + ", so I approved none of them."
	case err != nil:
		s.b.Logger().Warn("chat: checking a batch failed", "principal", s.principal(), "err", err)
		return couldNotDecide
	}
	lines := []string{fmt.Sprintf("Approving %d items (%s), each on its own:", len(ids), batch)}
	for _, id := range ids {
		lines = append(lines, s.decideIn(ctx, id, true, "", "", "", batch))
	}
	return strings.Join(lines, "\n")
}
