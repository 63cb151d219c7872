package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/countersign/countersign/kv"
)

// The console's passkey routes (passkey.go says what they guarantee):
//
//	GET  /ui/passkeys                  the person's passkeys (an admin's: everyone's), Add and Remove
//	POST /ui/passkeys/signin           a fresh OIDC sign-in, back to /ui/passkeys (registering needs it)
//	POST /ui/passkeys/begin            the registration's options (JSON), after that sign-in only
//	POST /ui/passkeys/register         the browser's new credential: stored, audited
//	POST /ui/passkeys/remove           a passkey removed (its owner, or an admin): audited
//	POST /ui/items/{id}/passkey/begin  a step-up's options (JSON) for the item
//	POST /ui/items/{id}/passkey        the browser's assertion: the item approvable as "passkey"
//
// The two begin routes answer JSON for passkey.js; the others are forms.
// Every POST carries the session's CSRF token (authed).

// passkeyRow is one passkey as the page lists it.
type passkeyRow struct {
	Ref, Name, Label, ID string
	Created, LastUsed    time.Time
	SignCount            uint32
	Mine                 bool
}

type passkeysData struct {
	Mine []passkeyRow
	// All is every principal's passkeys, for an admin; nil otherwise.
	All []passkeyRow
	// Fresh says until when the session's OIDC sign-in allows
	// registering ("" when it does not).
	Fresh string
	// CanSignIn says the person can sign in again at the provider here.
	CanSignIn bool
	Max       int
}

func rowOf(p passkeyRecord, ref string) passkeyRow {
	return passkeyRow{Ref: p.Ref, Name: p.Name, Label: p.Label, ID: p.idText(), Created: p.Created, LastUsed: p.LastUsed, SignCount: p.Credential.Authenticator.SignCount, Mine: p.Ref == ref}
}

// passkeysOff answers a passkey route when passkeys are not configured.
func (h *Handler) passkeysOff(w http.ResponseWriter, r *http.Request) bool {
	if h.o.Passkeys != nil {
		return false
	}
	h.fail(w, r, http.StatusNotFound, "Passkeys are not configured here. An admin enables them with web.passkeys (rp_id) in the config (docs/identity.md, Passkeys).")
	return true
}

// registerFresh says until when the session may register a passkey: its
// OIDC sign-in is at most PasskeyRegisterWithin old; false when it may not.
func (h *Handler) registerFresh(c *bot.Caller) (time.Time, bool) {
	if c == nil || c.AuthMethod != "oidc" || !c.SteppedUp(PasskeyRegisterWithin, h.now()) {
		return time.Time{}, false
	}
	return c.AuthAt.Add(PasskeyRegisterWithin), true
}

// mayRegister returns nil when the session may register a passkey now,
// else why not (the sentence to show).
func (h *Handler) mayRegister(c *bot.Caller, ref string) error {
	if _, ok := h.registerFresh(c); ok {
		return nil
	}
	how := "press “Sign in again” on this page"
	if err := h.mayReauthenticate(ref); err != nil {
		how = err.Error()
	}
	return errSignIn{fmt.Sprintf("Adding a passkey needs a fresh sign-in at your identity provider (OIDC) within the last %s, in this session, so that a passkey is never a way around step-up. Nothing was registered: %s, then add the passkey.", roundMinutes(PasskeyRegisterWithin), how)}
}

// roundMinutes renders d as "5 minutes".
func roundMinutes(d time.Duration) string {
	m := int(d.Round(time.Minute) / time.Minute)
	if m == 1 {
		return "1 minute"
	}
	return fmt.Sprintf("%d minutes", m)
}

// mayReauthenticate returns nil when the principal of ref can sign in
// again at the provider here, else why not.
func (h *Handler) mayReauthenticate(ref string) error {
	if h.oidc == nil {
		return errors.New("single sign-on (web.oidc) is not configured here, so no passkey can be registered; an admin sets web.oidc")
	}
	kind, name, _ := strings.Cut(ref, ":")
	if p, ok := h.o.People[name]; kind != "c" || !ok || p.Web == "" {
		return fmt.Errorf("%s has no single sign-on identity (principals[].web in the config), so no passkey can be registered for it; an admin adds one", name)
	}
	return nil
}

func (h *Handler) passkeysPage(w http.ResponseWriter, r *http.Request) {
	if h.passkeysOff(w, r) {
		return
	}
	caller, s := callerOf(r), sessionOf(r)
	d := passkeysData{Max: maxPasskeys, CanSignIn: h.mayReauthenticate(s.Ref) == nil}
	if until, ok := h.registerFresh(caller); ok {
		d.Fresh = until.UTC().Format("15:04 UTC")
	}
	err := h.o.Bot.View(r.Context(), func(tx kv.Tx) error {
		mine, err := loadPasskeys(tx, s.Ref)
		if err != nil {
			return err
		}
		for _, p := range mine {
			d.Mine = append(d.Mine, rowOf(p, s.Ref))
		}
		if !caller.MayAdminister() {
			return nil
		}
		all, err := allPasskeys(tx)
		d.All = []passkeyRow{}
		for _, p := range all {
			d.All = append(d.All, rowOf(p, s.Ref))
		}
		return err
	})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	p := page{Title: "Passkeys", Nav: "passkeys", Data: d}
	p.Problem = h.problemOf(r, "passkeys")
	switch r.URL.Query().Get("done") {
	case "registered":
		p.Notice = "Your passkey is registered. Approving an item that needs step-up now offers “Use a passkey”."
	case "removed":
		p.Notice = "The passkey is removed: it no longer steps anyone up."
	}
	h.render(w, r, http.StatusOK, "passkeys", p)
}

// passkeySignIn starts a fresh OIDC sign-in for registering a passkey, as
// the session's own principal, landing back on /ui/passkeys.
func (h *Handler) passkeySignIn(w http.ResponseWriter, r *http.Request) {
	if h.passkeysOff(w, r) {
		return
	}
	ref := sessionOf(r).Ref
	if err := h.mayReauthenticate(ref); err != nil {
		h.backTo(w, r, "/ui/passkeys", "passkeys", "You cannot sign in again here: "+err.Error()+".")
		return
	}
	h.startOIDC(w, r, pendingOIDC{StepUp: true, Started: h.now(), Expect: ref, Next: "/ui/passkeys"})
}

// backTo sends the browser to path with problem shown (problemURL).
func (h *Handler) backTo(w http.ResponseWriter, r *http.Request, path, where, problem string) {
	http.Redirect(w, r, h.problemURL(r, path, where, problem), http.StatusSeeOther)
}

// jsonAnswer writes v as a JSON answer with status.
func jsonAnswer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// jsonProblem answers a begin route's refusal: {"problem": msg}.
func jsonProblem(w http.ResponseWriter, status int, msg string) {
	jsonAnswer(w, status, map[string]string{"problem": msg})
}

// deny audits a refused passkey attempt (access_denied) as the caller.
func (h *Handler) deny(r *http.Request, caller *bot.Caller, msg string) {
	if err := h.o.Bot.Chat().Audit(r.Context(), caller, bot.Space{}, "access_denied", "web: passkey refused: "+msg); err != nil {
		h.o.Logger.Error("web: auditing a refused passkey attempt failed; the refusal stands", "err", err)
	}
}

// beginCeremony stores c as the session's one ceremony (replacing any
// other: the newest challenge is the only one that counts).
func (h *Handler) beginCeremony(r *http.Request, c ceremony) error {
	tok := tokenOf(r)
	return h.o.Bot.Store().Update(r.Context(), func(tx kv.Tx) error {
		s, err := sessionIn(tx, tok)
		if err != nil {
			return err
		}
		if s == nil {
			return errSignIn{"You are signed out, so nothing was done. Sign in again and retry."}
		}
		s.Ceremony = &c
		return putSession(tx, tok, s)
	})
}

// finishCeremony takes the session's ceremony out (used once, whatever
// follows) and checks it is for purpose and item, unexpired, begun at the
// same origin; the refusal is a message.
func (h *Handler) finishCeremony(r *http.Request, purpose string, item uint64) (*ceremony, string, error) {
	var c *ceremony
	err := h.o.Bot.Store().Update(r.Context(), func(tx kv.Tx) error {
		var err error
		_, c, err = takeCeremony(tx, tokenOf(r))
		return err
	})
	switch {
	case err != nil:
		return nil, "", err
	case c == nil:
		return nil, "No passkey request is open in this session (each one is used once, by the session that began it). Nothing was done: try again from the page.", nil
	case c.Purpose != purpose || c.Item != item:
		return nil, "That passkey answer was asked for something else (another item, or a registration). Nothing was done: try again from this page.", nil
	case !h.now().Before(c.Expires):
		return nil, fmt.Sprintf("The passkey request expired: it lasts %s. Nothing was done: try again.", roundMinutes(passkeyCeremonyTTL)), nil
	case !strings.EqualFold(c.Origin, h.base(r)):
		return nil, "That passkey answer came from another address than the request. Nothing was done: try again from this page.", nil
	}
	c.Data.Expires = time.Time{} // checked above, on this server's clock
	return c, "", nil
}

// passkeyBeginRegister answers the options for registering a passkey:
// only in a session whose OIDC sign-in is fresh.
func (h *Handler) passkeyBeginRegister(w http.ResponseWriter, r *http.Request) {
	if h.o.Passkeys == nil {
		jsonProblem(w, http.StatusNotFound, "Passkeys are not configured here (web.passkeys).")
		return
	}
	caller, s := callerOf(r), sessionOf(r)
	if err := h.mayRegister(caller, s.Ref); err != nil {
		h.deny(r, caller, err.Error())
		jsonProblem(w, http.StatusForbidden, err.Error())
		return
	}
	origin, msg := h.passkeyOrigin(h.base(r))
	if msg != "" {
		jsonProblem(w, http.StatusForbidden, msg)
		return
	}
	label := strings.TrimSpace(r.PostForm.Get("label"))
	if msg := labelProblem(label); msg != "" {
		jsonProblem(w, http.StatusBadRequest, msg)
		return
	}
	rp, err := h.relyingParty(origin)
	if err != nil {
		h.o.Logger.Error("web: the passkey relying party", "err", err)
		jsonProblem(w, http.StatusServiceUnavailable, "Passkeys are misconfigured here (web.passkeys); an admin must check the server log.")
		return
	}
	var user passkeyUser
	err = h.o.Bot.Store().Update(r.Context(), func(tx kv.Tx) error {
		var err error
		user, _, err = passkeyUserOf(tx, s.Ref, caller.Name, true)
		return err
	})
	if err != nil {
		h.o.Logger.Error("web: loading passkeys failed", "err", err)
		jsonProblem(w, http.StatusServiceUnavailable, "Your passkeys could not be loaded; nothing was done. Try again in a moment.")
		return
	}
	if len(user.creds) >= maxPasskeys {
		jsonProblem(w, http.StatusConflict, fmt.Sprintf("You hold %d passkeys, the most one person may. Remove one you no longer use, then add this one.", maxPasskeys))
		return
	}
	opts, data, err := rp.BeginRegistration(user,
		webauthn.WithExclusions(webauthn.Credentials(user.creds).CredentialDescriptors()),
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{ResidentKey: protocol.ResidentKeyRequirementPreferred, UserVerification: protocol.VerificationRequired}),
	)
	if err != nil {
		h.internalJSON(w, err)
		return
	}
	if err := h.beginCeremony(r, ceremony{Purpose: ceremonyRegister, Origin: origin, Label: label, Expires: h.now().Add(passkeyCeremonyTTL), Data: *data}); err != nil {
		h.internalJSON(w, err)
		return
	}
	jsonAnswer(w, http.StatusOK, opts)
}

func (h *Handler) internalJSON(w http.ResponseWriter, err error) {
	h.o.Logger.Error("web: a passkey request failed", "err", err)
	jsonProblem(w, http.StatusServiceUnavailable, "That could not be completed; nothing was done. It may be a temporary fault: try again in a moment.")
}

// labelProblem says what is wrong with a passkey's label, or "".
func labelProblem(label string) string {
	switch {
	case label == "":
		return "Name the passkey (for example “work laptop”), so you can tell your passkeys apart."
	case len([]rune(label)) > maxPasskeyLabel:
		return fmt.Sprintf("A passkey's name is at most %d characters.", maxPasskeyLabel)
	case strings.ContainsFunc(label, func(r rune) bool { return unicode.IsControl(r) || bot.Invisible(r) }):
		return "A passkey's name may not hold control or invisible characters."
	}
	return ""
}

// passkeyRegister stores the browser's new credential: the session's
// registration ceremony, still within its fresh OIDC sign-in, user
// verification done.
func (h *Handler) passkeyRegister(w http.ResponseWriter, r *http.Request) {
	if h.passkeysOff(w, r) {
		return
	}
	caller, s := callerOf(r), sessionOf(r)
	back := func(msg string) {
		h.deny(r, caller, msg)
		h.backTo(w, r, "/ui/passkeys", "passkeys", msg)
	}
	c, msg, err := h.finishCeremony(r, ceremonyRegister, 0)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if msg != "" {
		back(msg)
		return
	}
	if err := h.mayRegister(caller, s.Ref); err != nil {
		back(err.Error())
		return
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes([]byte(r.PostForm.Get("credential")))
	if err != nil {
		back("The browser's answer is not a passkey registration (" + webauthnReason(err) + "). Nothing was registered: try again, in a browser with passkeys.")
		return
	}
	rp, err := h.relyingParty(c.Origin)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	var user passkeyUser
	if err := h.o.Bot.View(r.Context(), func(tx kv.Tx) error {
		var err error
		user, _, err = passkeyUserOf(tx, s.Ref, caller.Name, false)
		return err
	}); err != nil {
		h.internal(w, r, err)
		return
	}
	cred, err := rp.CreateCredential(user, c.Data, parsed)
	if err != nil {
		back("The passkey could not be verified (" + webauthnReason(err) + "). Nothing was registered.")
		return
	}
	if !cred.Flags.UserVerified {
		back("Your authenticator did not verify you (no PIN, fingerprint or face check), and Countersign requires it. Nothing was registered.")
		return
	}
	rec := passkeyRecord{Ref: s.Ref, Name: caller.Name, Label: c.Label, Created: h.now(), Credential: *cred}
	call := h.callAs(caller, h.now())
	refusal := ""
	err = h.o.Bot.Update(r.Context(), call, func(tx *bot.Tx) error {
		refusal = ""
		if call.Caller.Suspended != "" {
			refusal = fmt.Sprintf("%s is suspended (%s); nothing was registered.", caller.Name, call.Caller.Suspended)
			return nil
		}
		if owner, err := tx.Get(bucketPasskeyIDs, cred.ID); err != nil || owner != nil {
			if err == nil {
				refusal = "That passkey is already registered. Nothing was registered twice."
			}
			return err
		}
		mine, err := loadPasskeys(tx, s.Ref)
		if err != nil {
			return err
		}
		if len(mine) >= maxPasskeys {
			refusal = fmt.Sprintf("You hold %d passkeys, the most one person may. Remove one first.", maxPasskeys)
			return nil
		}
		if err := savePasskey(tx, rec); err != nil {
			return err
		}
		return tx.Audit("passkey_registered", fmt.Sprintf("web: %s registered passkey %q (%s) after an OIDC sign-in at %s", caller.Name, rec.Label, shortID(rec.idText()), caller.AuthAt.UTC().Format(time.RFC3339)))
	})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if refusal != "" {
		back(refusal)
		return
	}
	http.Redirect(w, r, "/ui/passkeys?done=registered", http.StatusSeeOther)
}

// shortID is a credential id shortened for an audit entry.
func shortID(id string) string {
	if len(id) > 12 {
		return "id " + id[:12] + "…"
	}
	return "id " + id
}

// passkeyRemove removes one passkey: the caller's own, or, for an admin,
// anyone's.
func (h *Handler) passkeyRemove(w http.ResponseWriter, r *http.Request) {
	if h.passkeysOff(w, r) {
		return
	}
	caller, s := callerOf(r), sessionOf(r)
	ref := r.PostForm.Get("ref")
	if ref == "" {
		ref = s.Ref
	}
	id, err := base64.RawURLEncoding.DecodeString(r.PostForm.Get("id"))
	if err != nil || len(id) == 0 || len(id) > 1023 {
		h.fail(w, r, http.StatusBadRequest, "The form does not name a passkey. Reload the Passkeys page and try again.")
		return
	}
	if ref != s.Ref && !caller.MayAdminister() {
		msg := "Only an admin removes another person's passkey. Nothing was removed."
		h.deny(r, caller, msg)
		h.fail(w, r, http.StatusForbidden, msg)
		return
	}
	call := h.callAs(caller, h.now())
	err = h.o.Bot.Update(r.Context(), call, func(tx *bot.Tx) error {
		p, err := removePasskey(tx, ref, id)
		if err != nil {
			return err
		}
		whose := "their own"
		if ref != s.Ref {
			whose = p.Name + "'s"
		}
		return tx.Audit("passkey_removed", fmt.Sprintf("web: %s removed %s passkey %q (%s)", caller.Name, whose, p.Label, shortID(p.idText())))
	})
	switch {
	case errors.Is(err, errNoPasskey):
		h.backTo(w, r, "/ui/passkeys", "passkeys", "That passkey is not registered (removed already?). Nothing was done.")
	case err != nil:
		h.internal(w, r, err)
	default:
		http.Redirect(w, r, "/ui/passkeys?done=removed", http.StatusSeeOther)
	}
}

// passkeyBeginStepUp answers the options for stepping up with a passkey
// to approve item id: the challenge is the session's, for that item.
func (h *Handler) passkeyBeginStepUp(w http.ResponseWriter, r *http.Request) {
	if h.o.Passkeys == nil {
		jsonProblem(w, http.StatusNotFound, "Passkeys are not configured here (web.passkeys).")
		return
	}
	caller, s := callerOf(r), sessionOf(r)
	id, err := bot.ParseItemID(r.PathValue("id"))
	if err != nil {
		jsonProblem(w, http.StatusBadRequest, "That is not an item number.")
		return
	}
	it, err := h.o.Bot.Items().Get(r.Context(), id)
	switch {
	case errors.Is(err, bot.ErrNoItem):
		jsonProblem(w, http.StatusNotFound, fmt.Sprintf("There is no item #%d.", id))
		return
	case err != nil:
		h.internalJSON(w, err)
		return
	case !caller.MayRead() || !caller.InScope(it.Space.UserID):
		jsonProblem(w, http.StatusForbidden, "This item is not yours to decide.")
		return
	case !it.Pending():
		jsonProblem(w, http.StatusConflict, fmt.Sprintf("#%d is no longer pending, so there is nothing to step up for.", id))
		return
	}
	origin, msg := h.passkeyOrigin(h.base(r))
	if msg != "" {
		jsonProblem(w, http.StatusForbidden, msg)
		return
	}
	var user passkeyUser
	if err := h.o.Bot.View(r.Context(), func(tx kv.Tx) error {
		var err error
		user, _, err = passkeyUserOf(tx, s.Ref, caller.Name, false)
		return err
	}); err != nil {
		h.internalJSON(w, err)
		return
	}
	if len(user.creds) == 0 || user.handle == nil {
		jsonProblem(w, http.StatusConflict, "You have no passkey registered. Add one under Passkeys (it needs a fresh sign-in at your identity provider first), then step up with it.")
		return
	}
	rp, err := h.relyingParty(origin)
	if err != nil {
		h.internalJSON(w, err)
		return
	}
	opts, data, err := rp.BeginLogin(user, webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		h.internalJSON(w, err)
		return
	}
	if err := h.beginCeremony(r, ceremony{Purpose: ceremonyStepUp, Item: id, Origin: origin, Expires: h.now().Add(passkeyCeremonyTTL), Data: *data}); err != nil {
		h.internalJSON(w, err)
		return
	}
	jsonAnswer(w, http.StatusOK, opts)
}

// passkeyStepUp checks the browser's assertion for item id: the session's
// ceremony for that item, user verification done, a sign count that moved
// forward, a passkey of the session's principal still registered, the
// principal not suspended. The session then approves that item, and only
// that one, as "passkey" (itemCaller) while the step-up is fresh.
func (h *Handler) passkeyStepUp(w http.ResponseWriter, r *http.Request) {
	if h.passkeysOff(w, r) {
		return
	}
	caller, s := callerOf(r), sessionOf(r)
	id, err := bot.ParseItemID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "That is not an item number.")
		return
	}
	back := func(msg string) {
		h.deny(r, caller, fmt.Sprintf("#%d: %s", id, msg))
		h.backToItem(w, r, id, msg)
	}
	c, msg, err := h.finishCeremony(r, ceremonyStepUp, id)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if msg != "" {
		back(msg)
		return
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes([]byte(r.PostForm.Get("credential")))
	if err != nil {
		back("The browser's answer is not a passkey assertion (" + webauthnReason(err) + "). Nothing was done: try again.")
		return
	}
	rp, err := h.relyingParty(c.Origin)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	var user passkeyUser
	var recs []passkeyRecord
	if err := h.o.Bot.View(r.Context(), func(tx kv.Tx) error {
		var err error
		user, recs, err = passkeyUserOf(tx, s.Ref, caller.Name, false)
		return err
	}); err != nil {
		h.internal(w, r, err)
		return
	}
	cred, err := rp.ValidateLogin(user, c.Data, parsed)
	if err != nil {
		back("The passkey could not be verified (" + webauthnReason(err) + "). Nothing was done.")
		return
	}
	if !parsed.Response.AuthenticatorData.Flags.HasUserVerified() {
		back("Your authenticator did not verify you (no PIN, fingerprint or face check), and step-up requires it. Nothing was done.")
		return
	}
	if cred.Authenticator.CloneWarning {
		back("This passkey's signature counter went backwards, a sign that it was copied. It was not accepted; remove it under Passkeys and register a new one, and tell your security team.")
		return
	}
	i := slices.IndexFunc(recs, func(p passkeyRecord) bool { return sameCredential(p.Credential.ID, cred.ID) })
	if i < 0 {
		back("That passkey is not registered to you. Nothing was done.")
		return
	}
	rec := recs[i]
	now := h.now()
	call := h.callAs(caller, now)
	refusal := ""
	err = h.o.Bot.Update(r.Context(), call, func(tx *bot.Tx) error {
		refusal = ""
		if call.Caller.Suspended != "" {
			refusal = fmt.Sprintf("%s is suspended from approving (%s), so their passkeys step nobody up.", caller.Name, call.Caller.Suspended)
			return nil
		}
		// Read again: removed, or used by another request meanwhile.
		b, err := tx.Get(bucketPasskeys, passkeyKey(s.Ref, cred.ID))
		if err != nil {
			return err
		}
		if b == nil {
			refusal = "That passkey was removed. Nothing was done."
			return nil
		}
		var cur passkeyRecord
		if err := json.Unmarshal(b, &cur); err != nil {
			return err
		}
		if cur.Credential.Authenticator.SignCount != rec.Credential.Authenticator.SignCount {
			refusal = "That passkey was used by another request at the same moment. Nothing was done: try again."
			return nil
		}
		cur.Credential.Authenticator = cred.Authenticator
		cur.Credential.Flags = cred.Flags
		cur.LastUsed = now
		if err := savePasskey(tx, cur); err != nil {
			return err
		}
		sess, err := sessionIn(tx, tokenOf(r))
		if err != nil {
			return err
		}
		if sess == nil {
			refusal = "You are signed out, so nothing was done. Sign in again and retry."
			return nil
		}
		sess.Passkey = &passkeyStepUp{Item: id, At: now, Label: cur.Label}
		if err := putSession(tx, tokenOf(r), sess); err != nil {
			return err
		}
		return tx.Audit("passkey_used", fmt.Sprintf("web: %s stepped up with passkey %q (%s, user verified, sign count %d) for #%d", caller.Name, cur.Label, shortID(cur.idText()), cred.Authenticator.SignCount, id))
	})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if refusal != "" {
		back(refusal)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/ui/items/%d", id), http.StatusSeeOther)
}

// itemCaller is the caller deciding item id: the session's, with its
// passkey step-up when that was for this item (the decision's AuthAt and
// AuthMethod "passkey"), so a passkey steps up one item only.
func itemCaller(r *http.Request, id uint64) *bot.Caller {
	c, s := callerOf(r), sessionOf(r)
	if c == nil || s == nil || s.Passkey == nil || s.Passkey.Item != id || !s.Passkey.At.After(c.AuthAt) {
		return c
	}
	cc := *c
	cc.AuthAt, cc.AuthMethod = s.Passkey.At, passkeyAssurance
	return &cc
}

// webauthnReason is the library's account of a failed ceremony.
func webauthnReason(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if pe.Details != "" {
			return pe.Details
		}
		return pe.Type
	}
	return "not readable"
}

// stepUpView sets what an item that requires step-up offers caller: the
// fresh sign-in at the provider (StepUp), a passkey (Passkey), or, once
// stepped up enough, Approve (SteppedUp). An item whose tool requires a
// passkey (MinAssurance "passkey") is stepped up by a passkey only.
func (h *Handler) stepUpView(ctx context.Context, caller *bot.Caller, it bot.Item, d *itemData) {
	now := h.now()
	d.PasskeyNeeded = string(it.MinAssurance) == passkeyAssurance
	fresh := caller.SteppedUp(it.StepUp, now)
	if fresh && (!d.PasskeyNeeded || caller.AuthMethod == passkeyAssurance) {
		d.SteppedUp = caller.AuthAt.Add(it.StepUp).UTC().Format("15:04 UTC")
		if caller.AuthMethod == passkeyAssurance {
			d.SteppedUpWith = passkeyAssurance
		}
		return
	}
	d.StepUp = chat.RoundDuration(it.StepUp)
	if h.o.Passkeys == nil {
		return
	}
	s := sessionFrom(ctx)
	if s == nil {
		return
	}
	n, err := h.passkeyCount(ctx, s.Ref)
	if err != nil {
		h.o.Logger.Error("web: counting passkeys failed; the page offers none", "err", err)
		return
	}
	d.Passkey, d.NoPasskey = n > 0, n == 0
}

// passkeyAssurance is the assurance a passkey step-up gives (policy's
// AssurancePasskey, which an adapter names by its value).
const passkeyAssurance = "passkey"

// sessionFrom is the request's session from its context.
func sessionFrom(ctx context.Context) *session { s, _ := ctx.Value(keySession).(*session); return s }

// callAs is a call of caller on the console outside a tool (a passkey
// registered, used or removed): its transaction audits as caller and
// reads their suspension (Call.Caller.Suspended) in the transaction.
func (h *Handler) callAs(caller *bot.Caller, now time.Time) *bot.Call {
	c := h.o.Bot.SystemCall(now)
	c.Caller, c.Tool = caller, &bot.Tool{Name: Surface}
	return c
}
