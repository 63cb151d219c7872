package scim

import (
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

// groupRec is a directory group as stored. Its members' principal names
// are kept beside it in the core (bot.PutDirectoryGroup), under its
// displayName: the approver group approvers: {groups: [name]} reads.
type groupRec struct {
	ID       string         `json:"id"`
	Attrs    map[string]any `json:"attrs"`
	Created  time.Time      `json:"created"`
	Modified time.Time      `json:"modified"`
	Version  int            `json:"version"`
}

func (g *groupRec) displayName() string {
	s, _ := g.Attrs["displayName"].(string)
	return strings.TrimSpace(s)
}

// memberIDs are the SCIM ids of the group's members.
func (g *groupRec) memberIDs() []string {
	var out []string
	for id := range valuesOf(g.Attrs["members"]) {
		out = append(out, id)
	}
	return out
}

func (g *groupRec) resource() scimlib.Resource {
	attrs := make(scimlib.ResourceAttributes, len(g.Attrs))
	for k, v := range g.Attrs {
		attrs[k] = v
	}
	created, modified := g.Created, g.Modified
	return scimlib.Resource{ID: g.ID, Attributes: attrs,
		Meta: scimlib.Meta{Created: &created, LastModified: &modified, Version: fmt.Sprintf(`W/"%d"`, g.Version)}}
}

func (g *groupRec) filterable() map[string]any {
	m := make(map[string]any, len(g.Attrs)+1)
	for k, v := range g.Attrs {
		m[k] = v
	}
	m["id"] = g.ID
	return m
}

func loadGroup(tx kv.Tx, id string) (*groupRec, error) {
	b, err := tx.Get(bucketGroups, []byte(id))
	if err != nil || b == nil {
		return nil, err
	}
	var g groupRec
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("scim group %s: %w", id, err)
	}
	return &g, nil
}

func allGroups(tx kv.Tx) ([]*groupRec, error) {
	var out []*groupRec
	err := tx.Ascend(bucketGroups, nil, nil, func(_, v []byte) error {
		var g groupRec
		if err := json.Unmarshal(v, &g); err != nil {
			return err
		}
		out = append(out, &g)
		return nil
	})
	return out, err
}

// saveGroup stores g (old: what was stored, nil when new) and its members'
// principal names in the core. A member that is not a provisioned user is
// a 400: push the user before the group.
func saveGroup(tx *bot.Tx, old, g *groupRec) error {
	name := g.displayName()
	if name == "" {
		return badRequest("displayName is required: it names the approver group (approvers: {groups: [name]})")
	}
	key := []byte(strings.ToLower(name))
	taken, err := tx.Get(bucketGroupNames, key)
	if err != nil {
		return err
	}
	if taken != nil && string(taken) != g.ID {
		return conflict(fmt.Sprintf("a group named %q is already provisioned (group %s)", name, taken))
	}
	if old != nil && !strings.EqualFold(old.displayName(), name) {
		if err := tx.Delete(bucketGroupNames, []byte(strings.ToLower(old.displayName()))); err != nil {
			return err
		}
		if err := bot.DeleteDirectoryGroup(tx, old.displayName()); err != nil {
			return err
		}
	}
	if err := tx.Put(bucketGroupNames, key, []byte(g.ID)); err != nil {
		return err
	}
	var names []string
	for _, id := range g.memberIDs() {
		u, err := loadUser(tx, id)
		if err != nil {
			return err
		}
		if u == nil {
			return badRequest(fmt.Sprintf("member %s is not a provisioned user: provision the user before adding them to a group", id))
		}
		names = append(names, u.Principal)
	}
	if err := bot.PutDirectoryGroup(tx, bot.DirectoryGroup{Name: name, Members: names}); err != nil {
		return err
	}
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	return tx.Put(bucketGroups, []byte(g.ID), b)
}

// refreshGroupsOf rewrites the member names of every group user id is in
// (after a rename).
func refreshGroupsOf(tx *bot.Tx, id string) error {
	gs, err := allGroups(tx)
	if err != nil {
		return err
	}
	for _, g := range gs {
		if valuesOf(g.Attrs["members"])[id] {
			if err := saveGroup(tx, g, g); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropMember removes deleted user id from every group.
func dropMember(tx *bot.Tx, id string) error {
	gs, err := allGroups(tx)
	if err != nil {
		return err
	}
	for _, g := range gs {
		list, _ := g.Attrs["members"].([]any)
		if !valuesOf(list)[id] {
			continue
		}
		g.Attrs["members"] = without(list, map[string]bool{id: true})
		if err := saveGroup(tx, g, g); err != nil {
			return err
		}
	}
	return nil
}

// groups is the /Groups resource handler.
type groups struct{ a *Adapter }

// Create provisions a group with its members.
func (h groups) Create(r *http.Request, attrs scimlib.ResourceAttributes) (scimlib.Resource, error) {
	var out scimlib.Resource
	err := h.a.update(r, func(tx *bot.Tx) error {
		id, err := newID()
		if err != nil {
			return err
		}
		now := h.a.o.Bot.Now().UTC()
		g := &groupRec{ID: id, Attrs: cleanAttrs(attrs), Created: now, Modified: now, Version: 1}
		if err := saveGroup(tx, nil, g); err != nil {
			return err
		}
		out = g.resource()
		return tx.Audit("scim_group_created", fmt.Sprintf("directory group %s (%s) provisioned with %d members", id, g.displayName(), len(g.memberIDs())))
	})
	return out, fromBot(err)
}

// Get returns one group.
func (h groups) Get(r *http.Request, id string) (scimlib.Resource, error) {
	var g *groupRec
	err := h.a.o.Bot.View(r.Context(), func(tx kv.Tx) error {
		var err error
		g, err = loadGroup(tx, id)
		return err
	})
	if err != nil {
		return scimlib.Resource{}, err
	}
	if g == nil {
		return scimlib.Resource{}, scimerr.ScimErrorResourceNotFound(id)
	}
	return g.resource(), nil
}

// GetAll lists the groups a filter passes (`displayName eq "…"`).
func (h groups) GetAll(r *http.Request, params scimlib.ListRequestParams) (scimlib.Page, error) {
	var all []*groupRec
	err := h.a.o.Bot.View(r.Context(), func(tx kv.Tx) error {
		gs, err := allGroups(tx)
		for _, g := range gs {
			if params.FilterValidator == nil || params.FilterValidator.PassesFilter(g.filterable()) == nil {
				all = append(all, g)
			}
		}
		return err
	})
	if err != nil {
		return scimlib.Page{}, err
	}
	return pageOf(all, params), nil
}

// Replace sets every attribute of a group (PUT).
func (h groups) Replace(r *http.Request, id string, attrs scimlib.ResourceAttributes) (scimlib.Resource, error) {
	return h.change(r, id, func(g *groupRec) error {
		g.Attrs = cleanAttrs(attrs)
		return nil
	})
}

// Patch applies PATCH operations: members added and removed (Okta:
// remove members[value eq "id"]; Entra: Remove members with a value
// list), the displayName replaced.
func (h groups) Patch(r *http.Request, id string, ops []scimlib.PatchOperation) (scimlib.Resource, error) {
	return h.change(r, id, func(g *groupRec) error {
		attrs, err := applyOps(g.Attrs, ops)
		g.Attrs = attrs
		return err
	})
}

func (h groups) change(r *http.Request, id string, edit func(*groupRec) error) (scimlib.Resource, error) {
	var out scimlib.Resource
	err := h.a.update(r, func(tx *bot.Tx) error {
		old, err := loadGroup(tx, id)
		if err != nil {
			return err
		}
		if old == nil {
			return scimerr.ScimErrorResourceNotFound(id)
		}
		g := *old
		g.Attrs = cloneMap(old.Attrs)
		if err := edit(&g); err != nil {
			return err
		}
		g.Modified, g.Version = h.a.o.Bot.Now().UTC(), old.Version+1
		if err := saveGroup(tx, old, &g); err != nil {
			return err
		}
		out = g.resource()
		return tx.Audit("scim_group_updated", fmt.Sprintf("directory group %s (%s) updated: %d members", id, g.displayName(), len(g.memberIDs())))
	})
	return out, fromBot(err)
}

// Delete removes a group and its approver group.
func (h groups) Delete(r *http.Request, id string) error {
	err := h.a.update(r, func(tx *bot.Tx) error {
		g, err := loadGroup(tx, id)
		if err != nil {
			return err
		}
		if g == nil {
			return scimerr.ScimErrorResourceNotFound(id)
		}
		for _, del := range []func() error{
			func() error { return tx.Delete(bucketGroups, []byte(id)) },
			func() error { return tx.Delete(bucketGroupNames, []byte(strings.ToLower(g.displayName()))) },
			func() error { return bot.DeleteDirectoryGroup(tx, g.displayName()) },
		} {
			if err := del(); err != nil {
				return err
			}
		}
		return tx.Audit("scim_group_deleted", fmt.Sprintf("directory group %s (%s) deleted", id, g.displayName()))
	})
	return fromBot(err)
}
