package scim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	scimlib "github.com/elimity-com/scim"
	scimerr "github.com/elimity-com/scim/errors"
)

// SCIM buckets: the resources as the directory last sent them.
const (
	bucketUsers      = "scim_users"       // id -> userRec JSON
	bucketUserNames  = "scim_user_names"  // lower(userName) -> id
	bucketGroups     = "scim_groups"      // id -> groupRec JSON
	bucketGroupNames = "scim_group_names" // lower(displayName) -> id
)

// Why a suspension by the directory was made (bot.Suspension.Reason).
const (
	reasonDeactivated = "deactivated in the organisation's directory"
	reasonDeleted     = "removed from the organisation's directory"
)

// userRec is a directory user as stored.
type userRec struct {
	ID string `json:"id"`
	// Attrs are the user's attributes as the directory sent them and the
	// schema validated them (never a password: it is dropped).
	Attrs map[string]any `json:"attrs"`
	// Principal is the name of the principal the user acts as: the one
	// config.yaml declares for them (Linked), else the directory's own
	// (PrincipalID, stored, named by the userName in lower case).
	Principal   string    `json:"principal"`
	Linked      bool      `json:"linked,omitempty"`
	PrincipalID string    `json:"principal_id,omitempty"`
	Created     time.Time `json:"created"`
	Modified    time.Time `json:"modified"`
	Version     int       `json:"version"`
}

func (u *userRec) userName() string {
	s, _ := u.Attrs["userName"].(string)
	return strings.TrimSpace(s)
}

// active reads the active attribute: absent means active (RFC 7643 4.1.1
// leaves it to the provider; a provisioned user is active until told).
func (u *userRec) active() bool {
	if b, ok := u.Attrs["active"].(bool); ok {
		return b
	}
	return true
}

func (u *userRec) emails() []string {
	var out []string
	list, _ := u.Attrs["emails"].([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			if v, ok := m["value"].(string); ok && v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

func (u *userRec) resource() scimlib.Resource {
	attrs := make(scimlib.ResourceAttributes, len(u.Attrs))
	for k, v := range u.Attrs {
		attrs[k] = v
	}
	created, modified := u.Created, u.Modified
	return scimlib.Resource{ID: u.ID, Attributes: attrs,
		Meta: scimlib.Meta{Created: &created, LastModified: &modified, Version: fmt.Sprintf(`W/"%d"`, u.Version)}}
}

// filterable is the user's attributes with its id, as a filter reads them.
func (u *userRec) filterable() map[string]any {
	m := make(map[string]any, len(u.Attrs)+1)
	for k, v := range u.Attrs {
		m[k] = v
	}
	m["id"] = u.ID
	return m
}

func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// cleanAttrs copies what the directory sent, without what is never kept
// (a password) or is the provider's to set (id, meta, schemas).
func cleanAttrs(in map[string]any) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		switch strings.ToLower(k) {
		case "password", "id", "meta", "schemas":
			continue
		}
		out[k] = v
	}
	return out
}

func loadUser(tx kv.Tx, id string) (*userRec, error) {
	b, err := tx.Get(bucketUsers, []byte(id))
	if err != nil || b == nil {
		return nil, err
	}
	var u userRec
	if err := json.Unmarshal(b, &u); err != nil {
		return nil, fmt.Errorf("scim user %s: %w", id, err)
	}
	return &u, nil
}

func putUser(tx kv.Tx, u *userRec) error {
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return tx.Put(bucketUsers, []byte(u.ID), b)
}

// call is the audited call the directory's changes are made under.
func (a *Adapter) update(r *http.Request, fn func(tx *bot.Tx) error) error {
	c := a.o.Bot.SystemCall(a.o.Bot.Now())
	c.Caller = &bot.Caller{Principal: bot.Principal{ID: "scim", Name: "directory", Kind: "service", Role: "admin"}, Surface: "scim"}
	c.Tool = &bot.Tool{Name: "scim"}
	return a.o.Bot.Update(r.Context(), c, fn)
}

// users is the /Users resource handler.
type users struct{ a *Adapter }

// Create provisions a user: 409 when the userName is taken.
func (h users) Create(r *http.Request, attrs scimlib.ResourceAttributes) (scimlib.Resource, error) {
	var out scimlib.Resource
	err := h.a.update(r, func(tx *bot.Tx) error {
		id, err := newID()
		if err != nil {
			return err
		}
		now := h.a.o.Bot.Now().UTC()
		u := &userRec{ID: id, Attrs: cleanAttrs(attrs), Created: now, Modified: now, Version: 1}
		if err := h.a.save(tx, nil, u); err != nil {
			return err
		}
		out = u.resource()
		return tx.Audit("scim_user_created", fmt.Sprintf("directory user %s (%s) provisioned as %s%s", id, u.userName(), u.Principal, linkNote(u)))
	})
	return out, fromBot(err)
}

func linkNote(u *userRec) string {
	note := " (config.yaml declares them: its role, scopes and chat identities apply)"
	if !u.Linked {
		note = " (a principal the directory owns)"
	}
	if !u.active() {
		note += ", inactive"
	}
	return note
}

// Get returns one user.
func (h users) Get(r *http.Request, id string) (scimlib.Resource, error) {
	var u *userRec
	err := h.a.o.Bot.View(r.Context(), func(tx kv.Tx) error {
		var err error
		u, err = loadUser(tx, id)
		return err
	})
	if err != nil {
		return scimlib.Resource{}, err
	}
	if u == nil {
		return scimlib.Resource{}, scimerr.ScimErrorResourceNotFound(id)
	}
	return u.resource(), nil
}

// GetAll lists the users a filter passes (Okta and Entra ask
// `userName eq "…"` before creating one), a page at a time.
func (h users) GetAll(r *http.Request, params scimlib.ListRequestParams) (scimlib.Page, error) {
	var all []*userRec
	err := h.a.o.Bot.View(r.Context(), func(tx kv.Tx) error {
		return tx.Ascend(bucketUsers, nil, nil, func(_, v []byte) error {
			var u userRec
			if err := json.Unmarshal(v, &u); err != nil {
				return err
			}
			if params.FilterValidator == nil || params.FilterValidator.PassesFilter(u.filterable()) == nil {
				all = append(all, &u)
			}
			return nil
		})
	})
	if err != nil {
		return scimlib.Page{}, err
	}
	return pageOf(all, params), nil
}

// Replace sets every attribute of a user (PUT).
func (h users) Replace(r *http.Request, id string, attrs scimlib.ResourceAttributes) (scimlib.Resource, error) {
	return h.change(r, id, func(u *userRec) error {
		u.Attrs = cleanAttrs(attrs)
		return nil
	})
}

// Patch applies PATCH operations (Okta: replace {active: false}; Entra:
// Replace active, userName, emails[type eq "work"].value, …).
func (h users) Patch(r *http.Request, id string, ops []scimlib.PatchOperation) (scimlib.Resource, error) {
	return h.change(r, id, func(u *userRec) error {
		attrs, err := applyOps(u.Attrs, ops)
		u.Attrs = attrs
		return err
	})
}

// change loads user id, lets edit change its attributes, and saves it.
func (h users) change(r *http.Request, id string, edit func(*userRec) error) (scimlib.Resource, error) {
	var out scimlib.Resource
	err := h.a.update(r, func(tx *bot.Tx) error {
		old, err := loadUser(tx, id)
		if err != nil {
			return err
		}
		if old == nil {
			return scimerr.ScimErrorResourceNotFound(id)
		}
		u := *old
		u.Attrs = cloneMap(old.Attrs)
		if err := edit(&u); err != nil {
			return err
		}
		u.Modified, u.Version = h.a.o.Bot.Now().UTC(), old.Version+1
		if err := h.a.save(tx, old, &u); err != nil {
			return err
		}
		out = u.resource()
		return tx.Audit("scim_user_updated", fmt.Sprintf("directory user %s (%s) updated: acts as %s%s", id, u.userName(), u.Principal, linkNote(&u)))
	})
	return out, fromBot(err)
}

// Delete removes a user: the person is suspended (removed from the
// directory) and the principal the directory owned is revoked.
func (h users) Delete(r *http.Request, id string) error {
	err := h.a.update(r, func(tx *bot.Tx) error {
		u, err := loadUser(tx, id)
		if err != nil {
			return err
		}
		if u == nil {
			return scimerr.ScimErrorResourceNotFound(id)
		}
		if err := tx.Delete(bucketUsers, []byte(id)); err != nil {
			return err
		}
		if err := tx.Delete(bucketUserNames, []byte(strings.ToLower(u.userName()))); err != nil {
			return err
		}
		if err := suspend(tx, u.Principal, reasonDeleted); err != nil {
			return err
		}
		if u.PrincipalID != "" {
			if err := revokeOwned(tx, u.PrincipalID); err != nil {
				return err
			}
		}
		if err := dropMember(tx, id); err != nil {
			return err
		}
		return tx.Audit("scim_user_deleted", fmt.Sprintf("directory user %s (%s) deleted: %s is suspended", id, u.userName(), u.Principal))
	})
	return fromBot(err)
}

// save stores u (old is what was stored, nil for a new user): the
// userName's uniqueness, the principal it acts as, and its suspension.
func (a *Adapter) save(tx *bot.Tx, old, u *userRec) error {
	name := u.userName()
	if name == "" {
		return badRequest("userName is required: it names the person in Countersign")
	}
	key := []byte(strings.ToLower(name))
	taken, err := tx.Get(bucketUserNames, key)
	if err != nil {
		return err
	}
	if taken != nil && string(taken) != u.ID {
		return conflict(fmt.Sprintf("userName %q is already provisioned (user %s)", name, taken))
	}
	if old != nil && !strings.EqualFold(old.userName(), name) {
		if err := tx.Delete(bucketUserNames, []byte(strings.ToLower(old.userName()))); err != nil {
			return err
		}
	}
	if err := tx.Put(bucketUserNames, key, []byte(u.ID)); err != nil {
		return err
	}
	// Who the user acts as: config.yaml's principal when it declares one
	// (authoritative), else the directory's own.
	if cfg := a.o.Match(name, u.emails()); cfg != "" {
		u.Principal, u.Linked = cfg, true
		if u.PrincipalID != "" {
			// config.yaml took the person over: the directory's principal ends.
			if err := revokeOwned(tx, u.PrincipalID); err != nil {
				return err
			}
			u.PrincipalID = ""
		}
	} else {
		p, err := bot.ProvisionPerson(tx, u.PrincipalID, strings.ToLower(name), a.o.Role)
		if err != nil {
			return err
		}
		u.Principal, u.Linked, u.PrincipalID = p.Name, false, p.ID
	}
	if old != nil && old.Principal != u.Principal {
		// Renamed: the suspension follows the person.
		if err := reinstate(tx, old.Principal, "renamed in the directory to "+u.Principal); err != nil {
			return err
		}
	}
	if u.active() {
		if err := reinstate(tx, u.Principal, "active again in the organisation's directory"); err != nil {
			return err
		}
	} else if err := suspend(tx, u.Principal, reasonDeactivated); err != nil {
		return err
	}
	if err := putUser(tx, u); err != nil {
		return err
	}
	if old != nil && old.Principal != u.Principal {
		return refreshGroupsOf(tx, u.ID)
	}
	return nil
}

// suspend suspends the person named name for the directory's reason
// (bot.Tx.Suspend: a suspension recorded before, by a chat platform or an
// admin, is kept as it is).
func suspend(tx *bot.Tx, name, reason string) error {
	c := tx.Call()
	_, err := tx.Suspend(bot.Suspension{Name: name, Surface: Source, Reason: reason, At: c.Now, By: c.Caller.String()})
	return err
}

// reinstate lifts the directory's own suspension of the person named name:
// the directory lifts what it suspended, never a chat platform's or an
// admin's suspension (only an admin lifts those, lift_suspension).
func reinstate(tx *bot.Tx, name, why string) error {
	s, err := bot.LoadSuspension(tx, name)
	if err != nil || s == nil || s.Surface != Source {
		return err
	}
	_, err = tx.LiftSuspension(name, why)
	return err
}

// revokeOwned revokes a principal the directory provisioned.
func revokeOwned(tx *bot.Tx, id string) error {
	p, err := bot.LoadPrincipal(tx, id)
	if err != nil || p == nil || p.Source != bot.SourceDirectory {
		return err
	}
	p.Revoked = true
	return bot.SavePrincipal(tx, *p)
}

func cloneMap(m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		return map[string]any{}
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil || out == nil {
		return map[string]any{}
	}
	return out
}
