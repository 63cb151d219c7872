package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// This file is the console's batch approval: the inbox's checkboxes
// (a plain GET form) open a review page that shows every selected item's
// card whole, and its one button approves them, each on its own. Which
// items may be approved together is chat's one batch rule
// (chat.CheckBatch, the rule of the typed "approve 12 13 14"), checked
// when the review page is drawn and again when its form is sent; each
// approval is then chat.Decide (bot.Decide: the one decision rule, its own
// audit entry), carrying the card's basis and hash as the item page's
// Approve does, and the batch (chat.Decision.Batch), which the deciding
// transaction checks once more.

// batchRow is one item of the review page, with what its card shows.
type batchRow struct {
	Item         bot.Item
	Requester    string
	Space        string
	EffectLabel  string
	Reopened     string
	FactsHeading string
	Facts        []factRow
	// ReadOnly is why the person cannot approve it ("" if they can).
	ReadOnly string
	// Basis and Seen are what the form sends back for it: the card's
	// basis (chat.EditBasis) and the SHA-256 of its text (cardText).
	Basis, Seen string
}

// batchResult is one item's outcome after the form was sent.
type batchResult struct {
	ID   uint64
	OK   bool
	Line string
}

type batchData struct {
	Batch   string
	Rows    []batchRow
	IDs     string // "12, 13, 14"
	Nonce   string
	Usable  bool // every row may be approved by the person: the form is offered
	Results []batchResult
	Decided int
}

// batchIDs reads the selected items (id=12&id=13) of form values.
func batchIDs(vs []string) ([]uint64, string) {
	if len(vs) > chat.MaxBatch {
		return nil, fmt.Sprintf("%d items are selected; a batch is at most %d. Select fewer and try again. Nothing was done.", len(vs), chat.MaxBatch)
	}
	ids := make([]uint64, 0, len(vs))
	for _, v := range vs {
		id, err := bot.ParseItemID(strings.TrimSpace(v))
		if err != nil {
			return nil, "That selection names something that is not an item number. Go back to the inbox and select the items again. Nothing was done."
		}
		ids = append(ids, id)
	}
	if len(ids) < 2 {
		return nil, "Select at least two items to approve them together; to approve one, open it from the inbox. Nothing was done."
	}
	return ids, ""
}

// batchProblem is the page's sentence for a batch refused whole, and its
// HTTP status.
func batchProblem(err error) (int, string) {
	var br *chat.BatchRefusal
	if !errors.As(err, &br) {
		return 0, ""
	}
	status := http.StatusConflict
	switch br.Problem {
	case chat.BatchSize, chat.BatchRepeated:
		status = http.StatusBadRequest
	case chat.BatchHidden:
		status = http.StatusNotFound
	}
	msg := br.Error()
	return status, strings.ToUpper(msg[:1]) + msg[1:] + ", so none of them was approved. Go back to the inbox, change the selection, and try again."
}

// batchReview draws the review page of the selected items.
func (h *Handler) batchReview(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	p := page{Title: "Approve together", Nav: "inbox"}
	if !caller.MayRead() {
		p.Problem = "Your role (" + string(caller.Role) + ") does not hold the read capability, so items are not shown to you."
		h.render(w, r, http.StatusForbidden, "batch", p)
		return
	}
	ids, msg := batchIDs(r.URL.Query()["id"])
	if msg != "" {
		p.Problem, p.Data = msg, batchData{}
		h.render(w, r, http.StatusBadRequest, "batch", p)
		return
	}
	items, batch, err := chat.CheckBatch(r.Context(), h.o.Bot, caller, ids)
	if status, msg := batchProblem(err); msg != "" {
		p.Problem, p.Data = msg, batchData{}
		h.render(w, r, status, "batch", p)
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	d := batchData{Batch: batch, IDs: joinItemIDs(ids), Usable: true}
	d.Nonce, _ = randomToken(12)
	for _, it := range items {
		if why := h.itemAccess(r.Context(), caller, it); why != "" {
			// A sensitive item whose showing could not be audited, or
			// that this person may not see whole: not approved unseen.
			p.Problem, p.Data = fmt.Sprintf("#%d cannot be shown to you here: %s So none of them can be approved together; go back to the inbox and select the others.", it.ID, why), batchData{}
			h.render(w, r, http.StatusConflict, "batch", p)
			return
		}
		row := batchRow{
			Item: it, Requester: chat.NameOf(it.Requester), Space: spaceLine(it.Space),
			EffectLabel: chat.EffectLabel(it), Reopened: chat.ReopenedLine(it),
			ReadOnly: h.readOnlyWhy(caller, it),
			Basis:    chat.EditBasis(it), Seen: bot.SeenText(Surface, cardText(it), false).SHA256,
		}
		if len(it.Facts) > 0 {
			row.FactsHeading = chat.FactsHeading(it)
			for _, f := range it.Facts {
				row.Facts = append(row.Facts, factRow{Subject: f.Subject, Value: f.Value, Verdict: f.Verdict, Reasons: chat.JoinReasons(f.Reasons, 600), Was: f.Was, Safe: f.Verdict == "SAFE"})
			}
		}
		if row.ReadOnly != "" {
			d.Usable = false
		}
		d.Rows = append(d.Rows, row)
	}
	if !d.Usable {
		p.Problem = "You cannot approve every one of these items (each says why below), so they cannot be approved together. Go back to the inbox and select only those you may approve."
	}
	p.Data = d
	h.render(w, r, http.StatusOK, "batch", p)
}

// batchDecide approves the items of the review page's form, each on its
// own, and shows what became of each.
func (h *Handler) batchDecide(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	f := r.PostForm
	p := page{Title: "Approve together", Nav: "inbox"}
	if !caller.MayRead() {
		p.Problem = "Your role (" + string(caller.Role) + ") does not hold the read capability, so nothing was done."
		h.render(w, r, http.StatusForbidden, "batch", p)
		return
	}
	ids, msg := batchIDs(f["id"])
	if msg != "" {
		p.Problem, p.Data = msg, batchData{}
		h.render(w, r, http.StatusBadRequest, "batch", p)
		return
	}
	nonce := f.Get("nonce")
	if nonce == "" || len(nonce) > 64 {
		p.Problem, p.Data = "This form is not the review page's (it has no form id). Go back to the inbox, select the items and review them again. Nothing was done.", batchData{}
		h.render(w, r, http.StatusBadRequest, "batch", p)
		return
	}
	for _, id := range ids {
		if f.Get("basis_"+strconv.FormatUint(id, 10)) == "" {
			// Every approval names the card it was made on.
			p.Problem, p.Data = fmt.Sprintf("#%d was not shown on the review page this form came from. Go back to the inbox, select the items and review them again. Nothing was done.", id), batchData{}
			h.render(w, r, http.StatusBadRequest, "batch", p)
			return
		}
	}
	_, batch, err := chat.CheckBatch(r.Context(), h.o.Bot, caller, ids)
	if status, msg := batchProblem(err); msg != "" {
		p.Problem, p.Data = msg, batchData{}
		h.render(w, r, status, "batch", p)
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	d := batchData{Batch: batch, IDs: joinItemIDs(ids)}
	for _, id := range ids {
		key := strconv.FormatUint(id, 10)
		out := chat.Decide(r.Context(), h.o.Bot, chat.Decision{
			Surface: Surface, UserID: caller.ID, Caller: caller, ItemID: id, Verb: chat.Approve,
			Basis: f.Get("basis_" + key), Seen: seenField(f.Get("seen_" + key)), Batch: batch,
			Deliveries: []string{"web:" + caller.ID + ":" + nonce + ":" + key},
		})
		res := batchResult{ID: id}
		switch out.Status {
		case chat.Decided:
			res.OK, res.Line = true, doneHead("approve", id)
			if t := bot.OneLine(out.Item.Title, 140); t != "" && !out.Item.Sensitive {
				res.Line += ": “" + t + "”"
			}
			if out.Item.Effect != "" && !out.Item.Sensitive {
				res.Line += ". " + chat.EffectLabel(out.Item) + " " + bot.OneLine(out.Item.Effect, 400)
			}
			d.Decided++
		case chat.Counted:
			res.OK, res.Line = true, doneHead("vote", id)+" ("+bot.OneLine(out.Item.Tally, 80)+")"
			d.Decided++
		case chat.Duplicate:
			res.Line = fmt.Sprintf("#%d: this form was sent before, and that approval stands; nothing was done again.", id)
		default:
			res.Line = bot.OneLine(out.Reply, 600)
			if res.Line == "" {
				res.Line = fmt.Sprintf("#%d could not be approved; nothing was recorded on it.", id)
			}
		}
		d.Results = append(d.Results, res)
	}
	if d.Decided > 0 {
		p.Notice = fmt.Sprintf("Approved %d of %d items, each on its own, as %s (%s).", d.Decided, len(ids), bot.OneLine(caller.Name, 80), caller.Role)
	}
	if d.Decided < len(ids) {
		p.Problem = fmt.Sprintf("%d of %d items were not approved: each says why below.", len(ids)-d.Decided, len(ids))
	}
	p.Data = d
	h.render(w, r, http.StatusOK, "batch", p)
}

func joinItemIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = "#" + strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ", ")
}
