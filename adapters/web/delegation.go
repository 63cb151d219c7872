package web

import (
	"net/http"
	"strings"
	"time"
)

// The console's delegation page: GET /ui/delegation shows the signed-in
// person's delegation (theirs, and what is lent to them; an admin sees
// every one running) with a form to lend their approvals to someone until
// a time (POST /ui/delegation) and an End button each (POST
// /ui/delegation/end), both CSRF-checked by authed, both through
// bot.Delegations like the chat command: who may then decide what is the
// one decision rule's.

// delegationLayout is how the form's until reads and the page shows a
// time: UTC, to the minute (an <input type="datetime-local"> value).
const delegationLayout = "2006-01-02T15:04"

// delegationRow is one running delegation as the page shows it.
type delegationRow struct {
	From, To, Until, Line string
	// Ends says whether the signed-in person may end it (theirs, lent to
	// them, or they are an admin).
	Ends bool
}

type delegationData struct {
	Mine, Lent, Others []delegationRow
	// CanLend says whether the person may lend their approvals (a person
	// whose role holds approve); Why says why not.
	CanLend bool
	Why     string
	// Default is the form's until, eight hours from now; Min now.
	Default, Min string
}

func (h *Handler) delegation(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	ds, err := h.o.Bot.Delegations().Running(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	now := h.now().UTC()
	d := delegationData{Default: now.Add(8 * time.Hour).Format(delegationLayout), Min: now.Format(delegationLayout)}
	if why, ok := caller.MayLend(); ok {
		d.CanLend = true
	} else {
		d.Why = "You cannot lend your approvals: " + why + ". Only a person who may approve lends them."
	}
	for _, x := range ds {
		row := delegationRow{From: x.From, To: x.To, Until: x.Until.UTC().Format("2006-01-02 15:04"), Line: x.Line()}
		switch {
		case strings.EqualFold(x.From, caller.Name):
			row.Ends = true
			d.Mine = append(d.Mine, row)
		case strings.EqualFold(x.To, caller.Name):
			row.Ends = true
			d.Lent = append(d.Lent, row)
		case caller.MayAdminister():
			row.Ends = true
			d.Others = append(d.Others, row)
		}
	}
	p := page{Title: "Delegation", Nav: "delegation", Data: d}
	switch r.URL.Query().Get("done") {
	case "set":
		p.Notice = "Delegated. Cards show it until it ends; end it here or with `delegate off` in chat."
	case "ended":
		p.Notice = "Ended: the approvals are no longer lent."
	}
	p.Problem = h.problemOf(r, "delegation")
	h.render(w, r, http.StatusOK, "delegation", p)
}

// delegate lends the signed-in person's approvals: to (a principal name)
// until (UTC, delegationLayout).
func (h *Handler) delegate(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	to := strings.TrimSpace(r.PostForm.Get("to"))
	if to == "" || len(to) > 128 {
		http.Redirect(w, r, h.problemURL(r, "/ui/delegation", "delegation", "Name the person who decides for you (their Countersign name). Nothing was done."), http.StatusSeeOther)
		return
	}
	until, err := time.ParseInLocation(delegationLayout, strings.TrimSpace(r.PostForm.Get("until")), time.UTC)
	if err != nil {
		http.Redirect(w, r, h.problemURL(r, "/ui/delegation", "delegation", "Until must be a date and a time in UTC, such as 2026-12-02T18:00. Nothing was done."), http.StatusSeeOther)
		return
	}
	if _, err := h.o.Bot.Delegations().Set(r.Context(), caller, to, until); err != nil {
		msg, ok := userError(err)
		if !ok {
			h.internal(w, r, err)
			return
		}
		http.Redirect(w, r, h.problemURL(r, "/ui/delegation", "delegation", msg+" Nothing was done."), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/delegation?done=set", http.StatusSeeOther)
}

// endDelegation ends the delegation of from (the signed-in person's own
// when empty).
func (h *Handler) endDelegation(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	from := strings.TrimSpace(r.PostForm.Get("from"))
	if len(from) > 128 {
		h.fail(w, r, http.StatusBadRequest, "That is not a person's name.")
		return
	}
	if _, err := h.o.Bot.Delegations().End(r.Context(), caller, from, "ended in the console by "+caller.String()); err != nil {
		msg, ok := userError(err)
		if !ok {
			h.internal(w, r, err)
			return
		}
		http.Redirect(w, r, h.problemURL(r, "/ui/delegation", "delegation", msg), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/delegation?done=ended", http.StatusSeeOther)
}
