package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/countersign/countersign/bot"
)

// The console's standing grants: GET /ui/grants lists the live grants the
// signed-in person may see (list_grants, its scope rule) with a Revoke form
// each (POST /ui/grants/{n}/revoke, CSRF-checked by authed, through the
// revoke_grant tool like every surface). The item page's approve form
// offers the item's grants (bot.Item.Grants) as a choice; the choice goes
// through chat.Decide with Decision.Grant.

// grantRow is one grant as the page shows it.
type grantRow struct {
	ID          uint64 `json:"grant_id"`
	Name        string `json:"name"`
	Tool        string `json:"tool"`
	Kind        string `json:"kind"`
	AgentName   string `json:"agent_name"`
	UserID      string `json:"user_id"`
	AgentID     string `json:"agent_id"`
	RunID       string `json:"run_id"`
	CreatedBy   string `json:"created_by"`
	FromRequest string `json:"from_request"`
	ExpiresAt   string `json:"expires_at"`
	Uses        int    `json:"uses"`
	Constraint  string `json:"constraint"`
	ItemID      uint64 `json:"item_id"`
	// Inactive says why a live grant approves nothing (its maker may no
	// longer approve the call); "" when it is in force.
	Inactive string `json:"inactive"`
}

type grantsData struct {
	Rows      []grantRow
	CanRevoke bool
}

func (h *Handler) grants(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	var out struct {
		Grants []grantRow `json:"grants"`
	}
	if _, err := h.call(r.Context(), caller, "list_grants", map[string]any{}, &out); err != nil {
		if msg, ok := userError(err); ok {
			h.fail(w, r, http.StatusForbidden, msg)
			return
		}
		h.internal(w, r, err)
		return
	}
	p := page{Title: "Standing grants", Nav: "grants", Data: grantsData{Rows: out.Grants, CanRevoke: caller.Kind == "person"}}
	if n := r.URL.Query().Get("revoked"); n != "" {
		if _, err := strconv.ParseUint(n, 10, 64); err == nil {
			p.Notice = "Revoked grant #" + n + ": the next matching call waits for a person again."
		}
	}
	p.Problem = h.problemOf(r, "grants") // constant-time, bound to this session
	h.render(w, r, http.StatusOK, "grants", p)
}

func (h *Handler) revokeGrant(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	n, err := strconv.ParseUint(r.PathValue("n"), 10, 64)
	if err != nil || n == 0 {
		h.fail(w, r, http.StatusBadRequest, "That is not a grant number.")
		return
	}
	args := map[string]any{"grant_id": n}
	if reason := strings.TrimSpace(r.PostForm.Get("reason")); reason != "" {
		args["reason"] = reason
	}
	if _, err := h.call(r.Context(), caller, "revoke_grant", args, nil); err != nil {
		msg, ok := userError(err)
		if !ok {
			h.internal(w, r, err)
			return
		}
		http.Redirect(w, r, h.problemURL(r, "/ui/grants", "grants", msg), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/ui/grants?revoked=%d", n), http.StatusSeeOther)
}

// grantChoice reads the approve form's grant choice ("", "session",
// "duration|1h"); nil for none.
func grantChoice(v string) *bot.GrantChoice {
	if v == "" || len(v) > 64 {
		return nil
	}
	kind, dur, _ := strings.Cut(v, "|")
	return &bot.GrantChoice{Kind: kind, For: dur}
}

// grantValue is an offered grant as the form's value.
func grantValue(g bot.GrantOption) string {
	if g.For == "" {
		return g.Kind
	}
	return g.Kind + "|" + g.For
}

// matchArg is one argument of the request the approver may hold fixed in
// a grant, its name and value as the page shows them (shown: invisible
// characters as escapes); the name so shown is the checkbox's value too
// (grantMatch reads it back).
type matchArg struct {
	Name  string
	Value string
}

// maxMatchArgs bounds the constraint offered, as approve_action does.
const maxMatchArgs = 20

// requestArgs are the top-level arguments of the item's proposal (its
// "Arguments (JSON)" detail, present while it is unedited), raw; nil when
// it has none or they are not an object.
func requestArgs(it bot.Item) map[string]json.RawMessage {
	for _, f := range it.Details {
		if f.Label != "Arguments (JSON)" {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(f.Value), &m) != nil {
			return nil
		}
		return m
	}
	return nil
}

// matchArgs are the arguments the grant choice offers to hold fixed, in
// name order: none unless the item offers grants.
func matchArgs(it bot.Item) []matchArg {
	if len(it.Grants) == 0 {
		return nil
	}
	args := requestArgs(it)
	if len(args) < 2 || len(args) > maxMatchArgs {
		return nil // one argument: holding it fixed is the exact-arguments grant
	}
	out := make([]matchArg, 0, len(args))
	for name, raw := range args {
		v := string(raw)
		var s string
		if json.Unmarshal(raw, &s) == nil {
			v = s
		}
		v = bot.EscapeInvisible(v)
		if r := []rune(v); len(r) > 80 {
			v = string(r[:79]) + "…"
		}
		out = append(out, matchArg{Name: bot.EscapeInvisible(name), Value: v})
	}
	slices.SortFunc(out, func(a, b matchArg) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// grantMatch is the constraint of the arguments the approver ticked, with
// the request's values as the page showed them; msg says why it cannot
// be made. No names: nil (the exact arguments).
func grantMatch(it bot.Item, names []string) (map[string]any, string) {
	if len(names) == 0 {
		return nil, ""
	}
	if len(names) > maxMatchArgs {
		return nil, fmt.Sprintf("A grant can hold at most %d arguments fixed. Nothing was done.", maxMatchArgs)
	}
	args := requestArgs(it)
	byShown := make(map[string][]string, len(args)) // the name as shown -> the names shown so
	for k := range args {
		byShown[bot.EscapeInvisible(k)] = append(byShown[bot.EscapeInvisible(k)], k)
	}
	m := make(map[string]any, len(names))
	for _, n := range names {
		same := byShown[n]
		if len(same) != 1 { // none, or two names that read the same: neither
			// Not quoted: the name is the form's, and this sentence
			// travels in a URL (problemURL).
			return nil, "One of the arguments ticked to hold fixed is not an argument of this request; reload the page and tick again. Nothing was done."
		}
		m[same[0]] = args[same[0]]
	}
	return m, ""
}
