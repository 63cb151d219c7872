package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/countersign/countersign/kv"
)

// Surface is the name of the web console as a surface (Caller.Surface,
// chat.Decision.Surface).
const Surface = "web"

// inboxPage is how many items one page of the inbox shows; a cursor
// ("after") reaches the rest.
const inboxPage = 100

// auditPage is how many audit entries one page shows; auditScan how many of
// the newest entries the audit page reads through audit_log.
const (
	auditPage = 50
	auditScan = 1000
)

// ---- sign-in ----

type signinData struct {
	OIDC bool
	Next string
}

func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "signin", page{Title: "Sign in", Data: signinData{OIDC: h.oidc != nil}})
}

type linkData struct {
	Token string
	Name  string
}

// linkPage shows a verified link's "Continue as NAME" button. The link is
// consumed only by the POST, so that a chat client's link preview (a GET)
// cannot use it up.
func (h *Handler) linkPage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("t")
	c, err := parseLink(h.o.LinkKey, tok, h.now())
	if err != nil {
		h.signInFailed(w, r, err)
		return
	}
	caller, err := h.resolve(r.Context(), c.Ref)
	if err != nil {
		h.signInFailed(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "link", page{Title: "Sign in", Data: linkData{Token: tok, Name: caller.Name}})
}

func (h *Handler) linkSignIn(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	c, err := parseLink(h.o.LinkKey, r.PostForm.Get("t"), h.now())
	if err != nil {
		h.signInFailed(w, r, err)
		return
	}
	if _, err := h.resolve(r.Context(), c.Ref); err != nil {
		h.signInFailed(w, r, err)
		return
	}
	if err := h.o.Bot.Store().Update(r.Context(), func(tx kv.Tx) error { return consumeLink(tx, c) }); err != nil {
		h.signInFailed(w, r, err)
		return
	}
	if c.Item == 0 {
		h.signIn(w, r, c.Ref, "link")
		return
	}
	// An item's link (an email's): it lands on the item. A person who
	// signs in through single sign-on here does so for it too: the link
	// leads them to the identity provider rather than standing in for it.
	next := fmt.Sprintf("/ui/items/%d", c.Item)
	if kind, name, _ := strings.Cut(c.Ref, ":"); h.oidc != nil && kind == "c" && h.o.People[name].Web != "" {
		h.startOIDC(w, r, pendingOIDC{Started: h.now(), Next: next})
		return
	}
	h.signInWith(w, r, c.Ref, "link", signInState{Next: next})
}

func (h *Handler) signInFailed(w http.ResponseWriter, r *http.Request, err error) {
	if msg, ok := isSignIn(err); ok {
		h.fail(w, r, http.StatusForbidden, msg)
		return
	}
	h.internal(w, r, err)
}

// signIn starts a session for ref and sends the browser to the inbox. The
// redirect is a page of our own (a meta refresh), so that the SameSite=Strict
// cookie is sent on the next request even when the sign-in began on another
// site (a chat client, the identity provider).
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request, ref, via string) {
	h.signInWith(w, r, ref, via, signInState{})
}

// signInWith is signIn with what an OIDC sign-in adds: the provider's
// auth_time (step-up) and the page to land on (stepup.go).
func (h *Handler) signInWith(w http.ResponseWriter, r *http.Request, ref, via string, st signInState) {
	caller, err := h.resolve(r.Context(), ref)
	if err != nil {
		h.signInFailed(w, r, err)
		return
	}
	tok, err := h.newSession(r.Context(), caller, ref, via, st)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.setCookie(w, r, tok, int(h.o.SessionTTL.Seconds()))
	h.o.Logger.Info("web sign-in", "principal", caller.String(), "via", via)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	next, what := "/ui/", "the inbox"
	if st.Next != "" {
		next, what = st.Next, "the item"
	}
	fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=%s"><title>Signed in</title><link rel="stylesheet" href="/ui/static/style.css"></head><body><main class="narrow"><p>Signed in. <a href="%s">Continue to %s</a>.</p></main></body></html>`, next, next, what)
}

func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	if err := h.endSession(r.Context(), tokenOf(r)); err != nil {
		h.internal(w, r, err)
		return
	}
	h.setCookie(w, r, "", -1)
	http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
}

// ---- who may decide ----

// ---- inbox ----

type inboxRow struct {
	ID        uint64
	Kind      string
	KindNoun  string
	Title     string
	Space     string
	Channel   string
	Requester string
	Created   time.Time
	Expires   string
	Tally     string
	ReadOnly  string // why the caller cannot decide; "" if they can
	Withheld  bool   // title withheld (out of scope, or sensitive for a non-approver)
	Danger    bool   // approving it cannot be undone
	// Pick says the person may select it for a batch approval (it has a
	// bot.Item.Batch and is not read-only for them); Batch names it.
	Pick  bool
	Batch string
}

type kindCount struct {
	Kind, Noun string
	N          string // "12", or "1000+" past bot.FacetCap
	Selected   bool
}

type inboxData struct {
	Rows      []inboxRow
	Decidable int
	Total     int
	// Pickable counts the rows that may be selected for a batch
	// approval: those of a batch with two rows or more on this page. The
	// selection form is offered when there is one (Batching).
	Pickable int
	Batching bool
	Kinds    []kindCount
	Spaces   []string
	Channels []string
	Kind     string
	Space    string
	Channel  string
	Filtered bool
	NoRead   bool
	// Next is the link to the next page (the filters kept, after the
	// last item of this one); "" on the last page. Paged says this is not
	// the first page.
	Next  string
	Paged bool
	First string // the first page, the filters kept
}

// inbox lists the open items the signed-in person may see, soonest to
// expire first, a page at a time: the store is asked for exactly the
// items in the person's scopes (and the filters' space and kind), so that
// no number of other items can push one out of reach, and nothing of an
// item outside the person's scopes is shown, not even that it exists.
func (h *Handler) inbox(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	q := r.URL.Query()
	d := inboxData{Kind: q.Get("kind"), Space: q.Get("space"), Channel: q.Get("channel")}
	d.Filtered = d.Kind != "" || d.Space != "" || d.Channel != ""
	p := page{Title: "Inbox", Nav: "inbox", Notice: h.doneNotice(r.Context(), caller, q.Get("done"))}
	if !caller.MayRead() {
		d.NoRead = true
		p.Data = d
		h.render(w, r, http.StatusOK, "inbox", p)
		return
	}
	var after uint64
	if a := q.Get("after"); a != "" {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil || n == 0 {
			h.fail(w, r, http.StatusBadRequest, "That is not a page of the inbox: after must be an item number. Start again from the inbox.")
			return
		}
		after, d.Paged = n, true
	}
	items := h.o.Bot.Items()
	res, err := items.Queue(r.Context(), caller, bot.QueueQuery{Space: d.Space, Kind: bot.ItemKind(d.Kind), Channel: d.Channel, After: after, Limit: inboxPage})
	var be *bot.Error
	if errors.As(err, &be) && be.Kind == bot.KindInvalid {
		h.fail(w, r, http.StatusBadRequest, be.Msg+".")
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	facets, err := items.Facets(r.Context(), caller, d.Space)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	channels := map[string]bool{}
	if d.Channel != "" {
		channels[d.Channel] = true
	}
	for _, it := range res.Items {
		channels[it.Channel] = true
		row := inboxRow{
			ID: it.ID, Kind: string(it.Kind), KindNoun: chat.KindNoun(it.Kind), Title: bot.OneLine(it.Title, 140),
			Space: spaceLine(it.Space), Channel: it.Channel, Requester: chat.NameOf(it.Requester), Danger: it.Danger != nil,
			Created: it.CreatedAt, Tally: bot.OneLine(it.Tally, 80), ReadOnly: h.readOnlyWhy(caller, it),
		}
		if !it.ExpiresAt.IsZero() {
			if it.ExpiresAt.After(h.now()) {
				row.Expires = "expires in " + chat.RoundDuration(it.ExpiresAt.Sub(h.now()))
			} else {
				row.Expires = "expiry due"
			}
		}
		if !caller.MaySeeDetails(it) {
			row.Withheld, row.Title, row.Requester, row.Tally = true, "", "", ""
		}
		if row.ReadOnly == "" {
			d.Decidable++
			if it.Batch != "" {
				row.Pick, row.Batch = true, it.Batch
			}
		}
		d.Rows = append(d.Rows, row)
	}
	d.Total = len(d.Rows)
	// A checkbox only where there is something to batch it with.
	perBatch := map[string]int{}
	for _, row := range d.Rows {
		if row.Pick {
			perBatch[row.Batch]++
		}
	}
	for i := range d.Rows {
		if d.Rows[i].Pick && perBatch[d.Rows[i].Batch] < 2 {
			d.Rows[i].Pick = false
		}
		if d.Rows[i].Pick {
			d.Pickable++
		}
	}
	d.Batching = d.Pickable > 0
	for _, k := range []bot.ItemKind{bot.KindMemoryChange, bot.KindAction, bot.KindConsent, bot.KindQuestion} {
		n := strconv.Itoa(facets.Kinds[k])
		if facets.Capped[k] {
			n += "+"
		}
		d.Kinds = append(d.Kinds, kindCount{Kind: string(k), Noun: chat.KindNoun(k), N: n, Selected: d.Kind == string(k)})
	}
	d.Spaces = facets.Spaces
	d.Channels = sortedKeys(channels)
	v := url.Values{}
	for k, x := range map[string]string{"kind": d.Kind, "space": d.Space, "channel": d.Channel} {
		if x != "" {
			v.Set(k, x)
		}
	}
	d.First = "/ui/?" + v.Encode()
	if res.Next != 0 {
		v.Set("after", strconv.FormatUint(res.Next, 10))
		d.Next = "/ui/?" + v.Encode()
	}
	p.Data = d
	h.render(w, r, http.StatusOK, "inbox", p)
}

// doneNotice is the notice after a decision: what was decided, for whom
// (the request's title, its requester and space, when the person may see
// them) and as whom (the signed-in principal and role), then, for an
// approval, what happens now (chat's Effect: "Now: ward_bot may run
// order_medication once with these arguments, before 21:29 UTC.").
func (h *Handler) doneNotice(ctx context.Context, caller *bot.Caller, s string) string {
	verb, id, ok := strings.Cut(s, "-")
	if !ok {
		return ""
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return ""
	}
	head := doneHead(verb, n)
	if head == "" {
		return ""
	}
	as := "as " + bot.OneLine(caller.Name, 80) + " (" + string(caller.Role) + ")"
	it, err := h.o.Bot.Items().Get(ctx, n)
	if err != nil || !caller.MayRead() || !caller.InScope(it.Space.UserID) {
		return head + ", " + as + "."
	}
	var whom []string
	if r := chat.NameOf(it.Requester); r != "" && caller.MaySeeDetails(it) {
		whom = append(whom, r+"'s "+chat.KindNoun(it.Kind))
	} else {
		whom = append(whom, chat.KindNoun(it.Kind))
	}
	if sp := spaceLine(it.Space); sp != "" {
		whom = append(whom, "space "+sp)
	}
	msg := head
	if caller.MaySeeDetails(it) && it.Title != "" {
		msg += ": “" + bot.OneLine(it.Title, 140) + "”"
	}
	msg += " (" + strings.Join(whom, ", ") + "), " + as + "."
	switch {
	case verb == "vote":
		msg += " It needs more approvals"
		if it.Tally != "" {
			msg += " (" + bot.OneLine(it.Tally, 80) + ")"
		}
		msg += "."
	case (verb == "approve" || verb == "edit") && !it.Sensitive && it.Status == "approved" && it.Effect != "":
		msg += " " + chat.EffectLabel(it) + " " + bot.OneLine(it.Effect, 400)
	}
	return msg
}

// doneHead is the first words of the notice after a decision of item n.
func doneHead(verb string, n uint64) string {
	switch verb {
	case "approve":
		return fmt.Sprintf("Approved #%d", n)
	case "edit":
		return fmt.Sprintf("Approved #%d with your changes", n)
	case "reject":
		return fmt.Sprintf("Rejected #%d", n)
	case "answer":
		return fmt.Sprintf("Answered #%d", n)
	case "decline":
		return fmt.Sprintf("Declined #%d", n)
	case "vote":
		return fmt.Sprintf("Your approval of #%d is recorded", n)
	}
	return ""
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ---- item ----

type histRow struct {
	Value, Status, Source, Said string
	At                          time.Time
}

type itemData struct {
	Item       bot.Item
	KindNoun   string
	Title      string
	Space      string
	Pending    bool
	ReadOnly   string
	Withheld   string // why details are withheld
	Current    string
	Proposed   string
	Said       string
	Source     string
	Confidence string
	Subject    string
	History    []histRow
	Tool       string
	Args       string // pretty JSON
	// ArgsProposed says Args are the proposal of an edited request (the
	// edited version is among Fields): the page heads them so.
	ArgsProposed bool
	DryRun       string
	Category     string
	Stated       string
	SHA          string
	// Version is the SHA-256 of the arguments up for approval (the edited
	// ones, when edited): the Approve form sends it, so an approval from a
	// page another approver's edit has made stale is refused.
	Version    string
	Summary    string
	Fields     []bot.Field // the rest
	Options    []string
	Multi      bool
	Expires    string
	DecidedBy  string
	Status     string
	PollURL    string
	PollMillis int64
	IsMemory   bool

	// StepUp, when the item requires step-up and the caller's last
	// sign-in at the provider is not fresh, is the window ("5m0s"): the
	// page offers a fresh sign-in instead of Approve. SteppedUp says until
	// when the caller's sign-in counts, when it does.
	StepUp    string
	SteppedUp string
	// SteppedUpWith is how: "passkey", else a sign-in at the provider.
	// PasskeyNeeded says approving needs a passkey (tools[].step_up.method
	// passkey), which a sign-in at the provider does not give; Passkey
	// offers the caller's passkeys for the step-up ("" when they hold
	// none or passkeys are off), NoPasskey says they hold none.
	SteppedUpWith string
	PasskeyNeeded bool
	Passkey       bool
	NoPasskey     bool
	IsAction      bool
	IsQuestion    bool
	// MatchArgs are the arguments the grant choice lets the approver hold
	// fixed (the others may vary), with their values.
	MatchArgs []matchArg
	Nonce     string // names this rendering's forms, so a resubmission is applied once
	// Edit is the "Edit & approve" form's inputs, prefilled with what is
	// up for approval; nil when the item cannot be edited or the person
	// may not decide it. EditBasis names what the form started from.
	Edit      []editInput
	EditBasis string
	// Changes is chat's sentence for an item an approver edited
	// ("approved with changes by alice: dose 5mg → 2.5mg").
	Changes string

	// The card's lines for the person clicking, in chat's words (issue
	// 23): EffectLabel and Item.Effect ("If you approve:"), the facts the
	// approval rests on under FactsHeading, the arguments, why a person
	// is asked, the reopened line, the names without principal ids; the
	// rest is under Details (Item.Details and Votes).
	EffectLabel  string
	FactsHeading string
	Facts        []factRow
	Reopened     string
	Requester    string
	Votes        []voteRow
	// Basis is the card's basis (chat.EditBasis: the arguments and the
	// facts shown): the Approve form sends it, so an approval from a page
	// made stale by an edit or a change of the facts is refused.
	Basis string
	// Confirm, on a dangerous item, asks for its target to be typed.
	Confirm string
	// Seen is the SHA-256 of the page's card text as rendered (cardText):
	// the forms send it, and the vote records it.
	Seen string
	// BreakGlass, on the caller's own pending request of a tool under
	// break_glass.tools, offers to approve it alone (breakglass.go):
	// BreakGlassStepUp is the window of the fresh sign-in it needs first,
	// when the caller's is not fresh ("" once it is).
	BreakGlass       bool
	BreakGlassStepUp string
}

// factRow is one fact of the facts panel.
type factRow struct {
	Subject, Value, Verdict, Reasons, Was string
	Safe                                  bool
}

// voteRow is one vote under Details, with what the voter was shown.
type voteRow struct {
	Line    string
	Seen    string // the full SHA-256, when the vote was cast on a card or page
	Counted bool
}

// editInput is one input of the edit form: its form name is edit_<Index>.
type editInput struct {
	Index     int
	Label     string
	Value     string
	Multiline bool
}

// Bounds of the console's edit form: arguments edited one input each up
// to webEditInputs (else one JSON input), each input up to webEditText
// characters (the form body stays within the server's limit).
const (
	webEditInputs = 12
	webEditText   = 16000
)

// editLayout is the item's edit form as chat lays it out for the console.
// A text box would hide an invisible character (shown, web.go), so
// arguments whose names or values hold one are edited as one JSON object
// (chat's layout for nested arguments), shown with those characters as
// JSON escapes: that text means the same arguments, so the form approved
// unchanged approves exactly what the agent sent. A memory value holding
// one is not edited here (its text has no escapes that mean the
// character); the reason says so.
func editLayout(it bot.Item) (chat.EditLayout, string) {
	lay, why := chat.EditForm(it, webEditInputs, webEditText)
	if why != "" || !slices.ContainsFunc(lay.Inputs, func(in chat.EditInput) bool {
		return strings.ContainsFunc(in.Label+in.Value, bot.Invisible)
	}) {
		return lay, why
	}
	if it.Editable.Kind == bot.EditValue {
		return chat.EditLayout{}, "This value holds invisible characters (shown above as escapes such as \\u200b), which a text box would hide, so it cannot be edited here: approve or reject it as it is, or edit it over the API (confirm_change with value). Nothing was done."
	}
	return chat.EditForm(it, 0, webEditText)
}

func (h *Handler) loadItem(w http.ResponseWriter, r *http.Request) (bot.Item, bool) {
	id, err := bot.ParseItemID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "That is not an item number. Item numbers are positive numbers such as 12.")
		return bot.Item{}, false
	}
	it, err := h.o.Bot.Items().Get(r.Context(), id)
	if errors.Is(err, bot.ErrNoItem) {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no item #%d.", id))
		return bot.Item{}, false
	}
	if err != nil {
		h.internal(w, r, err)
		return bot.Item{}, false
	}
	return it, true
}

func (h *Handler) item(w http.ResponseWriter, r *http.Request) {
	it, ok := h.loadItem(w, r)
	if !ok {
		return
	}
	caller := itemCaller(r, it.ID) // with a passkey step-up for this item (passkey_pages.go)
	p := page{Title: fmt.Sprintf("#%d", it.ID), Nav: "inbox"}
	p.Problem = h.problemOf(r, fmt.Sprintf("item %d", it.ID))
	msg := h.itemAccess(r.Context(), caller, it)
	var d itemData
	if !caller.MayRead() || !caller.InScope(it.Space.UserID) {
		// Nothing of an item outside the person's scopes: not its kind,
		// status or times (chat's show says as little).
		d = itemData{Item: bot.Item{ID: it.ID}, Status: "hidden"}
	} else {
		d = h.itemView(r.Context(), caller, it)
	}
	d.Withheld = msg
	p.Data = d
	h.render(w, r, http.StatusOK, "item", p)
}

// itemAccess returns why the item's details are withheld from caller, or "";
// it audits a refusal, and the showing of a sensitive item's details.
func (h *Handler) itemAccess(ctx context.Context, caller *bot.Caller, it bot.Item) string {
	if !caller.MayRead() {
		return "Your role (" + string(caller.Role) + ") does not hold the read capability, so items are not shown to you."
	}
	if !caller.InScope(it.Space.UserID) {
		if err := h.o.Bot.Chat().Audit(ctx, caller, it.Space, "access_denied", fmt.Sprintf("web: %s (#%d)", bot.ScopeRefusal("show"), it.ID)); err != nil {
			h.o.Logger.Error("web: auditing a refused view failed; the refusal stands", "err", err)
		}
		return "This item is in a memory space outside your scope, so its details are not shown to you."
	}
	if it.Sensitive {
		if !caller.MaySeeDetails(it) {
			return "The details of this sensitive item are shown only to its requester and to people who may decide in its space."
		}
		if err := h.o.Bot.Chat().Audit(ctx, caller, it.Space, "view_sensitive", fmt.Sprintf("web: details of #%d shown", it.ID)); err != nil {
			h.o.Logger.Error("web: auditing a sensitive view failed; details withheld", "err", err)
			return "The details of this sensitive item could not be shown, because showing them could not be audited. Try again in a moment."
		}
	}
	return ""
}

func (h *Handler) itemView(ctx context.Context, caller *bot.Caller, it bot.Item) itemData {
	d := itemData{
		Item: it, KindNoun: chat.KindNoun(it.Kind), Title: it.Title, Space: spaceLine(it.Space),
		Pending: it.Pending(), Status: it.Status, Options: it.Options, Multi: it.Multi,
		PollURL: fmt.Sprintf("/ui/items/%d/status", it.ID), PollMillis: h.o.PollInterval.Milliseconds(),
		IsMemory: it.Kind == bot.KindMemoryChange, IsAction: it.Kind == bot.KindAction, IsQuestion: it.Kind == bot.KindQuestion,
	}
	if d.Pending && it.StepUp > 0 {
		h.stepUpView(ctx, caller, it, &d) // passkey_pages.go
	}
	if d.Pending {
		d.ReadOnly = h.readOnlyWhy(caller, it)
		d.Nonce, _ = randomToken(12)
		// The edit form approves too: on a step-up item it needs the
		// fresh sign-in Approve needs, so it is offered only with one.
		if lay, why := editLayout(it); d.ReadOnly == "" && d.StepUp == "" && why == "" {
			d.EditBasis = lay.Basis
			for i, in := range lay.Inputs {
				v := in.Value
				if in.Name == chat.ArgumentsInput {
					v = bot.EscapeInvisible(v) // JSON text: the escapes mean the same characters
				}
				d.Edit = append(d.Edit, editInput{Index: i, Label: in.Label, Value: v, Multiline: in.Multiline})
			}
		}
	}
	d.Changes = chat.WithChanges(it)
	h.breakGlassView(caller, it, &d) // breakglass.go
	if d.Pending {
		d.MatchArgs = matchArgs(it) // grants.go
		d.Basis = chat.EditBasis(it)
		if it.Danger != nil {
			d.Confirm = chat.TypeToConfirm(it)
		}
		d.Reopened = chat.ReopenedLine(it)
	}
	d.EffectLabel = chat.EffectLabel(it)
	d.Requester = chat.NameOf(it.Requester)
	if len(it.Facts) > 0 {
		d.FactsHeading = chat.FactsHeading(it)
		for _, f := range it.Facts {
			d.Facts = append(d.Facts, factRow{Subject: f.Subject, Value: f.Value, Verdict: f.Verdict, Reasons: chat.JoinReasons(f.Reasons, 600), Was: f.Was, Safe: f.Verdict == "SAFE"})
		}
	}
	for _, v := range it.Votes {
		row := voteRow{Line: chat.VoteLine(v), Counted: v.Counts}
		if v.Seen != nil {
			row.Seen = v.Seen.SHA256
		}
		d.Votes = append(d.Votes, row)
	}
	if !it.ExpiresAt.IsZero() && d.Pending {
		if it.ExpiresAt.After(h.now()) {
			d.Expires = it.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC") + " (in " + chat.RoundDuration(it.ExpiresAt.Sub(h.now())) + ")"
		} else {
			d.Expires = "due now"
		}
	}
	d.DecidedBy = chat.Deciders(it, 600)
	for _, f := range it.Details {
		switch f.Label {
		case "Subject":
			d.Subject = f.Value // the memory subject whose history is shown
		case "Arguments SHA-256", "Edited arguments SHA-256":
			d.Version = f.Value // the version up for approval
		}
	}
	for _, f := range it.Fields {
		switch f.Label {
		case "Current value":
			d.Current = f.Value
		case "Proposed value":
			d.Proposed = f.Value
		case "Said":
			d.Said = f.Value
		case "Source":
			d.Source = f.Value
		case "Confidence":
			d.Confidence = f.Value
		case "Subject":
			d.Subject = f.Value
		case "Tool":
			d.Tool = f.Value
		case "Arguments":
			d.Args = prettyJSON(f.Value)
		case "Proposed arguments":
			d.Args, d.ArgsProposed = prettyJSON(f.Value), true
		case "Dry-run plan":
			d.DryRun = f.Value
		case "Mechanics":
			d.Category = f.Value
		case "Category as stated by the agent":
			d.Stated = f.Value
		case "Arguments SHA-256":
			d.SHA = f.Value
			if d.Version == "" {
				d.Version = f.Value
			}
		case "Edited arguments SHA-256":
			d.Version = f.Value
			d.Fields = append(d.Fields, f)
		case "Summary":
			d.Summary = f.Value
		case "Space", "Proposed by":
			// shown in the header
		default:
			d.Fields = append(d.Fields, f)
		}
	}
	if d.IsMemory && d.Subject != "" && caller.InScope(it.Space.UserID) && caller.MayRead() && caller.MaySeeDetails(it) {
		d.History = h.history(ctx, caller, it.Space, d.Subject)
	}
	d.Seen = bot.SeenText(Surface, cardText(it), false).SHA256
	return d
}

// cardText is the text of an item's card as the page shows it, in the
// page's order: the danger warning, the first line, the reopened line,
// what approving does, the facts, the arguments, the fields, why a person
// is asked. Its SHA-256 is what an approver saw on the console (bot.Seen):
// the page never cuts anything, so it is whole.
func cardText(it bot.Item) string {
	var lines []string
	if it.Danger != nil && it.Pending() {
		lines = append(lines, it.Danger.Warning)
	}
	lines = append(lines, it.Title)
	if l := chat.ReopenedLine(it); l != "" && it.Pending() {
		lines = append(lines, l)
	}
	if l := chat.EffectLabel(it); l != "" {
		lines = append(lines, l+" "+it.Effect)
	}
	if len(it.Facts) > 0 {
		lines = append(lines, chat.FactsHeading(it))
		for _, f := range it.Facts {
			lines = append(lines, chat.FactLine(f))
		}
	}
	for _, a := range it.Args {
		lines = append(lines, a.Label+": "+a.Value)
	}
	for _, f := range it.Fields {
		lines = append(lines, f.Label+": "+f.Value)
	}
	if it.Asked != "" {
		lines = append(lines, chat.AskedLabel+" "+it.Asked)
	}
	return strings.Join(lines, "\n")
}

// history reads the subject's history through the history tool.
func (h *Handler) history(ctx context.Context, caller *bot.Caller, sp bot.Space, subject string) []histRow {
	var data struct {
		Facts []factJSON `json:"facts"`
	}
	if _, err := h.call(ctx, caller, "history", spaceArgs(sp, map[string]any{"subject": subject}), &data); err != nil {
		h.o.Logger.Warn("web: history failed", "err", err)
		return nil
	}
	out := make([]histRow, 0, len(data.Facts))
	for i := len(data.Facts) - 1; i >= 0; i-- {
		f := data.Facts[i]
		status := strings.ToLower(f.Status)
		if f.Proposal != nil {
			status = "proposal: " + f.Proposal.Status
		}
		out = append(out, histRow{Value: f.Value, Status: status, Source: f.Source, Said: f.Said, At: f.SetAt})
	}
	return out
}

func prettyJSON(s string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}

// itemStatus answers the item page's poll: the item's status, so that a
// page left open reloads when the item is decided elsewhere.
func (h *Handler) itemStatus(w http.ResponseWriter, r *http.Request) {
	it, ok := h.loadItem(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	status, tally := it.Status, len(it.DecidedBy)
	if c := callerOf(r); !c.MayRead() || !c.InScope(it.Space.UserID) {
		status, tally = "hidden", 0
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "tally": tally})
}

// decide takes the form's decision through chat.Decide, the one decision
// function of every surface: the same checks (scope, the item still
// pending, a reason to reject), the same tool call and decision rule and
// audit entry as a chat click or an API client's call, made as the
// signed-in principal. A form submitted twice (its nonce seen before) is
// applied once.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request) {
	id, err := bot.ParseItemID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "That is not an item number.")
		return
	}
	caller := itemCaller(r, id) // with a passkey step-up for this item (passkey_pages.go)
	f := r.PostForm
	d := chat.Decision{Surface: Surface, UserID: caller.ID, Caller: caller, ItemID: id, Reason: strings.TrimSpace(f.Get("reason"))}
	if n := f.Get("nonce"); n != "" && len(n) <= 64 {
		d.Deliveries = []string{"web:" + caller.ID + ":" + n}
	}
	if len(d.Reason) > 2000 {
		h.backToItem(w, r, id, "The reason is longer than 2000 characters; shorten it. Nothing was done.")
		return
	}
	action := f.Get("action")
	switch action {
	case "approve":
		d.Verb = chat.Approve
		d.Grant = grantChoice(f.Get("grant")) // grants.go
		if names := f["match"]; len(names) > 0 {
			// The arguments ticked to hold fixed: a constraint grant,
			// with the request's values (approve_action checks them).
			if d.Grant == nil {
				h.backToItem(w, r, id, "Holding arguments fixed is part of a standing grant: choose one of the grants too, or untick them. Nothing was done.")
				return
			}
			it, err := h.o.Bot.Items().Get(r.Context(), id)
			if err != nil {
				h.backToItem(w, r, id, "That item cannot be loaded; nothing was done.")
				return
			}
			m, msg := grantMatch(it, names)
			if msg != "" {
				h.backToItem(w, r, id, msg)
				return
			}
			d.Grant.Match = m
		}
		d.ArgsSHA256 = f.Get("args_sha256") // the version the page showed
		d.Basis = f.Get("basis")            // and the facts it showed
		d.Confirm = f.Get("confirm")        // a dangerous item's target, typed
		d.Seen = seenField(f.Get("seen"))
	case "break_glass":
		// One's own request, approved alone (breakglass.go): the one
		// rule's exception decides, in approve_action.
		d.Verb, d.BreakGlass = chat.Approve, true
		d.ArgsSHA256, d.Basis, d.Confirm, d.Seen = f.Get("args_sha256"), f.Get("basis"), f.Get("confirm"), seenField(f.Get("seen"))
		action = "approve"
	case "reject", "decline":
		d.Verb = chat.Reject
		d.Seen = seenField(f.Get("seen"))
	case "edit":
		// Approve with changes: the form's inputs read back through chat's
		// edit layout, then the same chat.Decide as every surface.
		d.Verb = chat.Approve
		d.Basis = f.Get("basis")
		it, err := h.o.Bot.Items().Get(r.Context(), id)
		if err != nil {
			h.backToItem(w, r, id, "That item cannot be loaded; nothing was done.")
			return
		}
		lay, why := editLayout(it)
		if why != "" {
			// Decided, refused or gone meanwhile: say what chat says.
			if out := chat.Prepare(r.Context(), h.o.Bot, chat.Decision{Surface: Surface, UserID: caller.ID, Caller: caller, ItemID: id, Verb: chat.Approve}); out.Status != chat.Ready && out.Reply != "" {
				why = out.Reply
			}
			h.backToItem(w, r, id, why)
			return
		}
		values := map[string]string{}
		for i, in := range lay.Inputs {
			values[in.Name] = f.Get("edit_" + strconv.Itoa(i))
		}
		if _, msg := lay.Apply(&d, values); msg != "" {
			h.backToItem(w, r, id, msg+" Nothing was done.")
			return
		}
	case "answer":
		d.Verb = chat.Answer
		for _, v := range f["answer"] {
			n, err := strconv.Atoi(v)
			if err != nil {
				h.backToItem(w, r, id, "That answer is not one of the question's options. Nothing was sent.")
				return
			}
			d.Choices = append(d.Choices, n)
		}
	default:
		h.fail(w, r, http.StatusBadRequest, "The form's action must be approve, edit, break_glass, reject, answer or decline.")
		return
	}
	out := chat.Decide(r.Context(), h.o.Bot, d)
	switch out.Status {
	case chat.Decided:
		http.Redirect(w, r, fmt.Sprintf("/ui/?done=%s-%d", action, id), http.StatusSeeOther)
	case chat.Counted:
		http.Redirect(w, r, fmt.Sprintf("/ui/?done=vote-%d", id), http.StatusSeeOther)
	default:
		msg := out.Reply
		if msg == "" {
			msg = "Nothing was done."
		}
		h.backToItem(w, r, id, msg)
	}
}

// seenField is the page's card hash a form sent back (itemData.Seen), as
// what the person was shown; nil unless it is a SHA-256 in hex.
func seenField(v string) *bot.Seen {
	if len(v) != 64 || strings.Trim(v, "0123456789abcdef") != "" {
		return nil
	}
	return &bot.Seen{SHA256: v, Surface: Surface}
}

// backToItem sends the browser back to the item with problem shown above
// it. The message travels in the URL with a MAC bound to the item and to
// the session (problemURL), so that a crafted link cannot put words of its
// own on a Countersign page, and a message made for one person's item
// shows on no other item and for nobody else.
func (h *Handler) backToItem(w http.ResponseWriter, r *http.Request, id uint64, problem string) {
	http.Redirect(w, r, h.problemURL(r, fmt.Sprintf("/ui/items/%d", id), fmt.Sprintf("item %d", id), problem), http.StatusSeeOther)
}

// problemURL is path with problem for the session of r to see on the page
// named where ("item 12", "grants"). Problems are this server's sentences;
// those that would quote a form's input do not (grantMatch).
func (h *Handler) problemURL(r *http.Request, path, where, problem string) string {
	return path + "?problem=" + url.QueryEscape(problem) + "&pm=" + h.problemMAC(r, where, problem)
}

// problemOf is the problem of r's URL when its MAC is this server's for
// the page where and r's session; "" otherwise.
func (h *Handler) problemOf(r *http.Request, where string) string {
	q := r.URL.Query()
	msg, got := q.Get("problem"), q.Get("pm")
	if msg == "" || got == "" || tokenOf(r) == "" {
		return ""
	}
	if !hmac.Equal([]byte(got), []byte(h.problemMAC(r, where, msg))) {
		return ""
	}
	return bot.OneLine(msg, 600)
}

// problemMAC authenticates problem for the page where and the session of
// r (the SHA-256 of its token: no session, no MAC that another matches).
func (h *Handler) problemMAC(r *http.Request, where, problem string) string {
	m := hmac.New(sha256.New, h.o.LinkKey)
	m.Write([]byte("problem v2\x00" + where + "\x00"))
	m.Write(tokenKey(tokenOf(r)))
	m.Write([]byte("\x00" + problem))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// ---- memory ----

type factJSON struct {
	ID         uint64    `json:"id"`
	Subject    string    `json:"subject"`
	Value      string    `json:"value"`
	Status     string    `json:"status"`
	Confidence float64   `json:"confidence"`
	Source     string    `json:"source"`
	Category   string    `json:"category"`
	Said       string    `json:"said"`
	SetAt      time.Time `json:"set_at"`
	Proposal   *struct {
		Change string `json:"change"`
		Status string `json:"status"`
		ItemID uint64 `json:"item_id"`
	} `json:"proposal"`
}

type memRow struct {
	ID         uint64
	Subject    string
	Value      string
	Status     string
	Confidence string
	Source     string
	SetAt      time.Time
	Proposal   string
	ItemID     uint64
	Verdict    string // SAFE or BLOCKED; "" when not checked
	Reasons    string
	Retired    bool
}

type memoryData struct {
	Space   string
	Rows    []memRow
	Retired []memRow
	Checked bool
}

// ViewAction is the audit action of a page view that read audited
// answers (the Memory page's verdicts): one entry per view, apart from
// the decisions; the Audit page hides them unless asked.
const ViewAction = "web_view"

// maxGateChecks bounds the check_before_act calls of one page view: each
// is a tool call and pays a token of the caller's rate limit.
const maxGateChecks = 20

func (h *Handler) memory(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	space := strings.TrimSpace(r.URL.Query().Get("space"))
	if space == "" {
		space = "default"
		if len(caller.Scopes) > 0 {
			space = caller.Scopes[0]
		}
	}
	p := page{Title: "Memory", Nav: "memory"}
	d := memoryData{Space: space}
	var list struct {
		Active  []factJSON `json:"active"`
		Flagged []factJSON `json:"flagged"`
		Retired []factJSON `json:"retired"`
	}
	sp := bot.Space{UserID: space}
	if _, err := h.call(r.Context(), caller, "list_memories", spaceArgs(sp, nil), &list); err != nil {
		if msg, ok := userError(err); ok {
			p.Problem = msg
			p.Data = d
			h.render(w, r, http.StatusOK, "memory", p)
			return
		}
		h.internal(w, r, err)
		return
	}
	// The verdicts are read as one view: the page's check_before_act calls
	// gather their audit entries, recorded as one web_view entry before
	// any verdict is shown (bot.CollectReads), so that viewing a space
	// never buries the decisions under one entry per subject.
	verdicts := map[string][2]string{}
	vctx, reads := bot.CollectReads(r.Context())
	for _, f := range append(append([]factJSON{}, list.Active...), list.Flagged...) {
		if _, done := verdicts[f.Subject]; done || len(verdicts) >= maxGateChecks {
			continue
		}
		var v struct {
			Verdict string   `json:"verdict"`
			Reasons []string `json:"reasons"`
		}
		if _, err := h.call(vctx, caller, "check_before_act", spaceArgs(sp, map[string]any{"subject": f.Subject}), &v); err != nil {
			verdicts[f.Subject] = [2]string{"", ""}
			continue
		}
		verdicts[f.Subject] = [2]string{v.Verdict, strings.Join(v.Reasons, "; ")}
		d.Checked = true
	}
	if err := reads.Record(r.Context(), h.o.Bot, caller, sp, ViewAction, "web: memory page"); err != nil {
		h.o.Logger.Error("web: auditing a memory page view failed; verdicts withheld", "err", err)
		verdicts, d.Checked = map[string][2]string{}, false
		p.Problem = "The gate's verdicts could not be shown, because showing them could not be audited. Try again in a moment."
	}
	row := func(f factJSON, retired bool) memRow {
		m := memRow{ID: f.ID, Subject: f.Subject, Value: f.Value, Status: strings.ToLower(f.Status), Confidence: fmt.Sprintf("%.2f", f.Confidence), Source: f.Source, SetAt: f.SetAt, Retired: retired}
		if f.Proposal != nil {
			m.Proposal = strings.ToLower(f.Proposal.Change) + " " + f.Proposal.Status
			m.ItemID = f.Proposal.ItemID
		}
		if !retired {
			v := verdicts[f.Subject]
			m.Verdict, m.Reasons = v[0], v[1]
		}
		return m
	}
	for _, f := range list.Active {
		d.Rows = append(d.Rows, row(f, false))
	}
	for _, f := range list.Flagged {
		d.Rows = append(d.Rows, row(f, false))
	}
	for _, f := range list.Retired {
		d.Retired = append(d.Retired, row(f, true))
	}
	p.Data = d
	h.render(w, r, http.StatusOK, "memory", p)
}

// ---- audit ----

type auditRow struct {
	bot.AuditEntry
	Link     string
	LinkText string
}

type auditData struct {
	Space, Principal, Action, Since, Until string
	Rows                                   []auditRow
	First, Next                            string
	Older                                  bool // this page is not the newest
	Total                                  int
	Cut                                    bool // auditScan entries read without filling the page
	Verify                                 string
	VerifyOK                               bool
	Export                                 string
	Allowed                                bool
	// Views shows the entries of page views (ViewAction), hidden by
	// default so that the decisions stand out; Hidden counts those left
	// out of this page.
	Views  bool
	Hidden int
	// Choose: the person sees one space's trail at a time and has named
	// none (an unscoped member or viewer): the page asks for a space,
	// suggesting those with open items (Suggest), instead of a refusal.
	Choose  bool
	Suggest []string
}

var requestRef = regexp.MustCompile(`\b((?:req|con|ask)_[0-9a-f]{16})\b`)
var memoryRef = regexp.MustCompile(`#(\d+)\b`)

// auditBatch reads one page of audit_log as caller: entries older than
// cursor (newest first when cursor is empty), and the cursor of the next.
func (h *Handler) auditBatch(ctx context.Context, caller *bot.Caller, space, cursor string, limit int) ([]bot.AuditEntry, string, error) {
	var data struct {
		Entries    []bot.AuditEntry `json:"entries"`
		NextCursor string           `json:"next_cursor"`
	}
	args := map[string]any{"limit": limit}
	if space != "" {
		args["user_id"] = space
	}
	if cursor != "" {
		args["cursor"] = cursor
	}
	_, err := h.call(ctx, caller, "audit_log", args, &data)
	return data.Entries, data.NextCursor, err
}

func (h *Handler) audit(w http.ResponseWriter, r *http.Request) {
	h.auditPage(w, r, "", false)
}

func (h *Handler) auditPage(w http.ResponseWriter, r *http.Request, verify string, verifyOK bool) {
	caller := callerOf(r)
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	d := auditData{Space: strings.TrimSpace(q.Get("space")), Principal: strings.TrimSpace(q.Get("principal")), Action: strings.TrimSpace(q.Get("action")),
		Since: q.Get("since"), Until: q.Get("until"), Verify: verify, VerifyOK: verifyOK,
		Allowed: caller.MayVerify()}
	p := page{Title: "Audit", Nav: "audit"}
	if !d.Allowed {
		p.Problem = fmt.Sprintf("Access denied: 'audit_log' requires the 'verify' capability; your role(s) ['%s'] do not grant it.", caller.Role)
		p.Data = d
		h.render(w, r, http.StatusForbidden, "audit", p)
		return
	}
	d.Views = q.Get("views") == "1"
	if d.Space == "" && !caller.SeesWholeAudit() {
		if len(caller.Scopes) == 0 {
			// Any one space's trail, but not the whole deployment's:
			// ask which, rather than open on a refusal.
			d.Choose = true
			if facets, err := h.o.Bot.Items().Facets(r.Context(), caller, ""); err == nil {
				d.Suggest = facets.Spaces
			}
			if !slices.Contains(d.Suggest, "default") {
				d.Suggest = append(d.Suggest, "default")
			}
			p.Data = d
			h.render(w, r, http.StatusOK, "audit", p)
			return
		}
		d.Space = caller.Scopes[0]
	}
	since, sinceOK := parseDay(d.Since)
	until, untilOK := parseDay(d.Until)
	filtered := d.Principal != "" || d.Action != "" || sinceOK || untilOK
	// Read audit_log page by page from the cursor until a page of matching
	// entries is full, or auditScan entries were read.
	cursor, next := strings.TrimSpace(q.Get("cursor")), ""
	batch := auditPage
	if filtered {
		batch = 250
	}
	scanned := 0
fill:
	for scanned < auditScan {
		entries, nc, err := h.auditBatch(r.Context(), caller, d.Space, cursor, batch)
		if err != nil {
			if msg, ok := userError(err); ok {
				p.Problem = msg
				p.Data = d
				h.render(w, r, http.StatusOK, "audit", p)
				return
			}
			h.internal(w, r, err)
			return
		}
		for _, e := range entries {
			scanned++
			if d.Principal != "" && !strings.Contains(strings.ToLower(e.Principal), strings.ToLower(d.Principal)) {
				continue
			}
			if d.Action != "" && !strings.EqualFold(e.Action, d.Action) {
				continue
			}
			if e.Action == ViewAction && !d.Views && d.Action == "" {
				d.Hidden++
				continue
			}
			ts, _ := time.Parse(time.RFC3339, e.TS)
			if (sinceOK && ts.Before(since)) || (untilOK && !ts.Before(until.Add(24*time.Hour))) {
				continue
			}
			d.Rows = append(d.Rows, auditLink(e))
			if len(d.Rows) == auditPage {
				next = strconv.FormatUint(e.Seq, 10)
				break fill
			}
		}
		next = nc
		if nc == "" {
			break
		}
		cursor = nc
	}
	d.Cut = scanned >= auditScan && next != ""
	d.Total = len(d.Rows)
	d.Older = q.Get("cursor") != ""
	base := url.Values{}
	for k, v := range map[string]string{"space": d.Space, "principal": d.Principal, "action": d.Action, "since": d.Since, "until": d.Until} {
		if v != "" {
			base.Set(k, v)
		}
	}
	d.Export = "/ui/audit/export?" + base.Encode()
	if d.Views {
		base.Set("views", "1")
	}
	d.First = "/ui/audit?" + base.Encode()
	if next != "" {
		v := cloneValues(base)
		v.Set("cursor", next)
		d.Next = "/ui/audit?" + v.Encode()
	}
	p.Data = d
	h.render(w, r, http.StatusOK, "audit", p)
}

// auditLink links an entry to what it concerns: the item of the request it
// names, the item a web view concerned, or the memory (space) it changed.
func auditLink(e bot.AuditEntry) auditRow {
	row := auditRow{AuditEntry: e}
	if m := requestRef.FindStringSubmatch(e.Detail); m != nil {
		row.Link, row.LinkText = "/ui/requests/"+m[1], m[1]
	} else if m := memoryRef.FindStringSubmatch(e.Detail); m != nil && strings.HasPrefix(e.Detail, "web: ") {
		row.Link, row.LinkText = "/ui/items/"+m[1], "item #"+m[1]
	} else if m := memoryRef.FindStringSubmatch(e.Detail); m != nil && e.UserID != "" {
		row.Link, row.LinkText = "/ui/memory?space="+url.QueryEscape(e.UserID)+"#m-"+m[1], "memory #"+m[1]
	} else if e.UserID != "" {
		row.Link, row.LinkText = "/ui/memory?space="+url.QueryEscape(e.UserID), "space "+e.UserID
	}
	return row
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func parseDay(s string) (time.Time, bool) {
	t, err := time.Parse("2006-01-02", strings.TrimSpace(s))
	return t, err == nil
}

// verify runs verify_audit and shows its result above the log.
func (h *Handler) verify(w http.ResponseWriter, r *http.Request) {
	var rep struct {
		Intact bool `json:"intact"`
	}
	res, err := h.call(r.Context(), callerOf(r), "verify_audit", map[string]any{}, &rep)
	if err != nil {
		if msg, ok := userError(err); ok {
			h.auditPage(w, r, msg, false)
			return
		}
		h.internal(w, r, err)
		return
	}
	h.auditPage(w, r, res.Text, rep.Intact)
}

// export writes the audit entries of the chosen scope as JSON Lines,
// newest first, reading audit_log page by page (the same authorisation as
// the page).
func (h *Handler) export(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	space := strings.TrimSpace(r.URL.Query().Get("space"))
	entries, cursor, err := h.auditBatch(r.Context(), caller, space, "", auditScan)
	if err != nil {
		if msg, ok := userError(err); ok {
			h.fail(w, r, http.StatusForbidden, msg)
			return
		}
		h.internal(w, r, err)
		return
	}
	name := "countersign-audit.jsonl"
	if space != "" {
		name = "countersign-audit-" + safeFile(space) + ".jsonl"
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	for {
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return
			}
		}
		if cursor == "" {
			return
		}
		if entries, cursor, err = h.auditBatch(r.Context(), caller, space, cursor, auditScan); err != nil {
			h.o.Logger.Error("web: audit export cut short", "err", err)
			return
		}
	}
}

// requestItem sends /ui/requests/{id} to the item of an action, consent or
// question request.
func (h *Handler) requestItem(w http.ResponseWriter, r *http.Request) {
	itemID, err := h.o.Bot.Items().OfRequest(r.Context(), r.PathValue("rid"))
	if err != nil || itemID == 0 {
		h.fail(w, r, http.StatusNotFound, "That request has no item to show (it was decided at once, or does not exist).")
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/ui/items/%d", itemID), http.StatusSeeOther)
}

func safeFile(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return '_'
	}, bot.OneLine(s, 40))
}

// ---- tool calls ----

// call runs a tool as caller through bot.Call and decodes its data into out.
func (h *Handler) call(ctx context.Context, caller *bot.Caller, tool string, args map[string]any, out any) (bot.Result, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return bot.Result{}, err
	}
	res, err := h.o.Bot.Call(ctx, caller, tool, raw)
	if err != nil {
		return res, err
	}
	if out != nil && res.Data != nil {
		b, err := json.Marshal(res.Data)
		if err != nil {
			return res, err
		}
		if err := json.Unmarshal(b, out); err != nil {
			return res, err
		}
	}
	return res, nil
}

func spaceArgs(sp bot.Space, extra map[string]any) map[string]any {
	args := map[string]any{"user_id": sp.UserID}
	if sp.AgentID != "" {
		args["agent_id"] = sp.AgentID
	}
	if sp.RunID != "" {
		args["run_id"] = sp.RunID
	}
	for k, v := range extra {
		args[k] = v
	}
	return args
}

// userError returns the message of an error meant for the caller.
func userError(err error) (string, bool) {
	var be *bot.Error
	if errors.As(err, &be) && be.Kind != bot.KindInternal {
		return be.Error(), true
	}
	return "", false
}

// ---- text ----

func spaceLine(sp bot.Space) string { return bot.OneLine(sp.Label(), 200) }

// readOnlyWhy is why the one decision rule leaves it read-only for caller,
// for the page ("you requested it", "the open stage (pharmacist, stage 2
// of 2) is decided by groups pharmacists"); "" when caller may decide it.
func (h *Handler) readOnlyWhy(caller *bot.Caller, it bot.Item) string {
	why, _ := h.o.Bot.Items().ReadOnly(caller, it)
	return why
}
