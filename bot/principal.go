package bot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// Principal buckets.
const (
	bucketPrincipals = "principals" // id -> Principal JSON
	bucketKeys       = "keys"       // sha256(key) -> principal id
)

// KeyPrefix starts every API key, so a leaked key is recognisable.
const KeyPrefix = "cs_sk_"

// Principal is a person, agent or service with one role and optional scopes.
type Principal struct {
	ID        string      `json:"id"`
	Name      string      `json:"name"`
	Role      policy.Role `json:"role"`
	Kind      string      `json:"kind"`             // person, agent or service
	Scopes    []string    `json:"scopes,omitempty"` // user_ids it may touch; empty = all
	Revoked   bool        `json:"revoked,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	// Source is who made the principal: "" for an admin (keys create,
	// create_principal), SourceDirectory for the organisation's directory
	// (SCIM), which owns it: it has no API key.
	Source string `json:"source,omitempty"`
}

// Caller is the authenticated identity behind one tool call: a principal,
// and, when the call came from chat, the chat identity that was mapped to it.
type Caller struct {
	Principal
	// Surface is where the call came from: http, mcp, cli, slack, discord.
	Surface string
	// ChatID is the platform user id when the call came from chat.
	ChatID string
	// AuthAt is when the person last signed in at the identity provider
	// (the ID token's auth_time) and AuthMethod how ("oidc"): only a web
	// session after a fresh OIDC sign-in carries them; chat identities and
	// API keys never do. Step-up (policy.Decidable.StepUp) checks them.
	AuthAt     time.Time
	AuthMethod string
	// Groups are the approver groups the caller belongs to: those its
	// identity provider asserts (the OIDC groups claim of a console
	// sign-in) and, once a call is under way (Bot.Call), the configured
	// groups that list it. The directory's groups (SCIM) are read beside
	// them in every deciding transaction, and decide the groups the
	// directory provisions (withDirectory): Decider carries the union.
	Groups []string
	// Suspended, when set, says why the principal is suspended from
	// approving (suspensions.go): the store's word, read in every deciding
	// transaction. The one decision rule refuses them.
	Suspended string
	// SignIn is how the console session the call comes from was opened
	// ("link", "oidc"); "" off the console. With AuthAt it makes the
	// decision's assurance (Assurance).
	SignIn string
	// Delegators are the people who lend the caller their approvals now
	// (delegations.go): read from the store in every deciding transaction.
	Delegators []policy.Delegator
	// dirOf are the directory's groups that list the caller and dirDrop
	// the claimed groups the directory provisions (it decides them), read
	// from the store in the deciding transaction when dirRead is set
	// (withDirectory, people.go).
	dirOf, dirDrop []string
	dirRead        bool
}

// Assurance is how the caller is authenticated for a decision at now, a
// strong sign-in counting as fresh within within (policy.AssuranceOf):
// recorded on every vote, shown on cards and in receipts.
func (c *Caller) Assurance(within time.Duration, now time.Time) policy.Assurance {
	return policy.AssuranceOf(c.Decider(), within, now)
}

// withGroups is caller with the configured groups that list it, and the
// on-call rotations it is on call for now, added to its own: a copy, so a
// caller shared between calls is never changed.
func (b *Bot) withGroups(caller *Caller) *Caller {
	if caller == nil || len(b.groups) == 0 && len(b.onCall) == 0 {
		return caller
	}
	c := *caller
	var onCall []string
	own := caller.Groups
	if len(b.onCall) > 0 {
		now := b.now()
		for name, r := range b.onCall {
			if who := r.OnCall(now); who != "" && strings.EqualFold(who, caller.Name) {
				onCall = append(onCall, name)
			}
		}
		// A claim naming a rotation puts nobody on call: only the
		// rotation's turn does.
		own = slices.DeleteFunc(slices.Clone(own), func(g string) bool { return b.configuredGroup(g) && !b.groups.Has(g) })
	}
	c.Groups = policy.MergeGroups(own, b.groups.Of(caller.Name), onCall)
	return &c
}

// String renders the caller as the seeds' "name [id]": the principal id, or
// the chat user id for a call from chat.
func (c *Caller) String() string {
	if c == nil {
		return "[]"
	}
	id := c.ID
	if c.ChatID != "" {
		id = c.ChatID
	}
	return fmt.Sprintf("%s [%s]", c.Name, id)
}

// Decider is the caller as the one decision rule (policy.Decide)
// sees it: a chat user carries the mapped principal's kind, role and scopes.
func (c *Caller) Decider() policy.Decider {
	if c == nil {
		return policy.Decider{}
	}
	return policy.Decider{ID: c.ID, Name: c.Name, Display: c.String(), Kind: c.Kind, Role: c.Role, Scopes: c.Scopes, AuthAt: c.AuthAt, AuthMethod: c.AuthMethod, Groups: c.groupsNow(), Suspended: c.Suspended, Surface: c.Surface, SignIn: c.SignIn, Delegators: c.Delegators}
}

// SteppedUp reports whether the caller's last strong sign-in is fresh
// enough at now for an item that requires step-up within (see
// policy.SteppedUp); the decision itself is the one rule's.
func (c *Caller) SteppedUp(within time.Duration, now time.Time) bool {
	return c != nil && policy.SteppedUp(c.AuthAt, within, now)
}

// StepUpNote says, for an audit entry, how the caller stepped up ("step-up
// oidc auth_time=…"); "" when the caller carries no strong sign-in.
func (c *Caller) StepUpNote() string {
	if c == nil || c.AuthAt.IsZero() {
		return ""
	}
	return fmt.Sprintf("step-up %s auth_time=%s", c.AuthMethod, c.AuthAt.UTC().Format(time.RFC3339))
}

// MayDecide is the one decision rule applied to this caller and item: nil
// when the caller may decide it, else the refusal (which check, and the
// "Access denied: …" message).
func (c *Caller) MayDecide(it policy.Decidable) *policy.Refusal {
	return policy.Decide(c.Decider(), it)
}

// ReadOnly reports whether the one decision rule leaves item it read-only
// for the caller, and why in a few words ("you requested it", "outside
// your scope"). The tool's own approvers and the item's state are checked
// when the decision is made: they have the final word.
func (c *Caller) ReadOnly(it Item) (why string, readOnly bool) {
	name, id := splitDisplay(it.Requester)
	r := policy.Decide(c.Decider(), policy.Decidable{
		Ref: fmt.Sprintf("#%d", it.ID), RequesterID: id, RequesterName: name, RequesterDisplay: it.Requester,
		SpaceUserID: it.Space.UserID,
	})
	if r == nil {
		return "", false
	}
	role := policy.Role("")
	if c != nil {
		role = c.Role
	}
	return r.Short(role), true
}

// ReadOnly is Caller.ReadOnly with what the item's source says of who
// decides it now (Item.Decidable: the tool's approvers, the open stage's
// when it is signed off in stages, the people who approved an earlier
// stage), and the caller's groups as a decision resolves them (the
// configured groups and on-call rotations beside the provider's): a
// person who is not an approver of the open stage sees the item
// read-only, and why ("the open stage (pharmacist, stage 2 of 2) is
// decided by groups pharmacists"). Step-up and assurance are left out (a
// surface offers the fresh sign-in instead), and the decision reads the
// item again in its own transaction: it has the final word.
func (x Items) ReadOnly(caller *Caller, it Item) (why string, readOnly bool) {
	if it.Decidable == nil || !it.Pending() {
		return caller.ReadOnly(it)
	}
	d := *it.Decidable
	d.StepUp, d.MinAssurance, d.At = 0, "", x.b.now()
	c := x.b.withGroups(caller)
	if c != nil && !c.dirRead && len(d.Approvers.Groups) > 0 {
		// The directory's groups, as a decision reads them; on a failed
		// read the item is shown as the configuration alone says (the
		// decision reads them again, and has the final word).
		_ = x.b.View(context.Background(), func(tx kv.Tx) error {
			cc, err := withDirectory(tx, x.b, c)
			if err == nil {
				c = cc
			}
			return err
		})
	}
	r := policy.Decide(c.Decider(), d)
	if r == nil {
		return "", false
	}
	if r.Check == policy.CheckApprovers {
		if d.Stage != "" {
			return fmt.Sprintf("the open stage (%s) is decided by %s", d.Stage, d.Approvers), true
		}
		return "decided by " + d.Approvers.String(), true
	}
	role := policy.Role("")
	if caller != nil {
		role = caller.Role
	}
	return r.Short(role), true
}

// splitDisplay splits a "name [id]" display into its parts.
func splitDisplay(s string) (name, id string) {
	name, rest, ok := strings.Cut(s, " [")
	if !ok {
		return strings.TrimSpace(s), ""
	}
	return name, strings.TrimSuffix(rest, "]")
}

// MayRead reports whether the caller's role holds the read capability.
func (c *Caller) MayRead() bool { return c != nil && policy.Grants(c.Role, policy.CapRead) }

// MayAdminister reports whether the caller's role holds the admin
// capability.
func (c *Caller) MayAdminister() bool { return c != nil && policy.Grants(c.Role, policy.CapAdmin) }

// MayWrite reports whether the caller's role holds the write capability
// (what confirm_action needs: the MCP gateway asks it of a read-only
// upstream call it passes straight through).
func (c *Caller) MayWrite() bool { return c != nil && policy.Grants(c.Role, policy.CapWrite) }

// MayVerify reports whether the caller's role holds the verify capability
// (the audit log of its spaces, verify_audit).
func (c *Caller) MayVerify() bool { return c != nil && policy.Grants(c.Role, policy.CapVerify) }

// InScope reports whether memory space userID is within the caller's
// scopes (every space for an unscoped caller or an admin).
func (c *Caller) InScope(userID string) bool {
	return c != nil && policy.InScope(c.Role, c.Scopes, userID)
}

// SeesWholeAudit reports whether the caller may read the deployment-wide
// audit log: an admin, or an auditor whose key is not limited to some
// spaces (reviewing the whole trail is what the auditor role is for).
func (c *Caller) SeesWholeAudit() bool {
	return c != nil && (policy.Grants(c.Role, policy.CapAdmin) || (c.Role == policy.RoleAuditor && len(c.Scopes) == 0))
}

// ScopeRefusal is the refusal every surface gives when tool targets a
// memory space outside the caller's scope.
func ScopeRefusal(tool string) string { return policy.DenyScope(tool) }

// MaySeeDetails reports whether the caller may see the details of item it
// (the one rule, policy.SeesDetails): always for an item that is not
// sensitive; for a sensitive one, only its requester and those who may
// decide in its space.
func (c *Caller) MaySeeDetails(it Item) bool {
	name, id := splitDisplay(it.Requester)
	return policy.SeesDetails(c.Decider(), policy.Decidable{Ref: fmt.Sprintf("#%d", it.ID), RequesterID: id, RequesterName: name, SpaceUserID: it.Space.UserID}, it.Sensitive)
}

// newKey returns a random API key and its stored hash.
func newKey() (key, hash string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	key = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return key, hashKey(key), nil
}

func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func newPrincipalID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "prin_" + hex.EncodeToString(b[:]), nil
}

// ValidateName checks a principal name: 1-64 characters of letters, digits,
// '_', '-', '.' or ':'.
func ValidateName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("must be 1 to 64 characters")
	}
	for _, r := range name {
		ok := r == '_' || r == '-' || r == '.' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("may hold only letters, digits, '_', '-', '.' and ':'")
		}
	}
	return nil
}

// MaxScopes bounds the scope list of one principal.
const MaxScopes = 256

// ParseScopes reads a key's comma-separated scope list (the user_ids it
// may touch): "" or "*" is every space, and "*" mixed with user_ids is
// dropped. A list that names no user_id (",,", " ") is refused rather than
// widened to every space, as are more than MaxScopes user_ids and a
// user_id that is no valid space; the error is an *Error of field scopes.
func ParseScopes(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" && p != "*" {
			out = append(out, p)
		}
	}
	switch {
	case len(out) == 0 && s != "" && strings.TrimSpace(s) != "*":
		return nil, Invalid("scopes", "%q names no user_id; list the user_ids the key may touch (a,b), or leave scopes out for a key that may touch every space", s)
	case len(out) > MaxScopes:
		return nil, Invalid("scopes", "at most %d user_ids; leave it empty for all", MaxScopes)
	}
	for _, sc := range out {
		if err := ValidateSpace(Space{UserID: sc}); err != nil {
			return nil, Invalid("scopes", "each user_id must be at most 128 bytes without control characters")
		}
	}
	return out, nil
}

// NewKey describes a principal to create with an API key (CreateKey): the
// create_principal tool and `countersign keys create` make keys the same
// way.
type NewKey struct {
	Name string
	Role policy.Role
	// Kind is agent, person or service; "" follows the role (admin and
	// member are people, the others agents): a person decides, an agent
	// or a service never approves, whatever its role.
	Kind string
	// Scopes are the user_ids the key may touch (ParseScopes); none: all.
	Scopes []string
	// Via ends the audit entry's detail ("cli": " via cli"); "": nothing.
	Via string
}

// CreatedKey is what CreateKey made: the principal, its API key and its
// own callback signing secret, neither of which is stored or shown again.
type CreatedKey struct {
	Principal      Principal
	Key            string
	CallbackSecret string
}

// CreateKey creates the principal k describes in tx, with its API key and
// its own callback signing secret (so that no other principal can sign the
// callbacks of its requests), and audits it as create_principal.
func CreateKey(tx *Tx, now time.Time, k NewKey) (CreatedKey, error) {
	kind := k.Kind
	if kind == "" {
		kind = "agent"
		if k.Role == policy.RoleAdmin || k.Role == policy.RoleMember {
			kind = "person"
		}
	}
	p, key, err := CreatePrincipal(tx, now, k.Name, k.Role, kind, k.Scopes)
	if err != nil {
		return CreatedKey{}, err
	}
	secret, err := tx.NewCallbackSecret(p.ID)
	if err != nil {
		return CreatedKey{}, err
	}
	detail := fmt.Sprintf("%s %q role=%s kind=%s scopes=%s", p.ID, p.Name, p.Role, p.Kind, strings.Join(p.Scopes, ","))
	if k.Via != "" {
		detail += " via " + k.Via
	}
	if err := tx.Audit("create_principal", detail); err != nil {
		return CreatedKey{}, err
	}
	return CreatedKey{Principal: p, Key: key, CallbackSecret: secret}, nil
}

// CreatePrincipal stores a new principal inside tx and returns it with its
// API key, which is never stored and cannot be shown again.
func CreatePrincipal(tx kv.Tx, now time.Time, name string, role policy.Role, kind string, scopes []string) (Principal, string, error) {
	if err := ValidateName(name); err != nil {
		return Principal{}, "", Invalid("name", "%v", err)
	}
	if _, err := policy.ParseRole(string(role)); err != nil {
		return Principal{}, "", Invalid("role", "%v", err)
	}
	switch kind {
	case "":
		kind = "agent"
	case "agent", "person", "service":
	default:
		return Principal{}, "", Invalid("kind", "unknown kind %q; use agent, person or service", kind)
	}
	if role == policy.RoleAdmin && len(scopes) > 0 {
		return Principal{}, "", Invalid("scopes", "an admin key is never limited by scopes (the admin role manages every space), so scopes on it would do nothing; create it without scopes, or give a member key the scopes")
	}
	id, err := newPrincipalID()
	if err != nil {
		return Principal{}, "", err
	}
	key, hash, err := newKey()
	if err != nil {
		return Principal{}, "", err
	}
	p := Principal{ID: id, Name: name, Role: role, Kind: kind, Scopes: scopes, CreatedAt: now.UTC()}
	b, err := json.Marshal(p)
	if err != nil {
		return Principal{}, "", err
	}
	if err := tx.Put(bucketPrincipals, []byte(id), b); err != nil {
		return Principal{}, "", err
	}
	if err := tx.Put(bucketKeys, []byte(hash), []byte(id)); err != nil {
		return Principal{}, "", err
	}
	return p, key, nil
}

// LoadPrincipal reads a principal by id; it returns nil if there is none.
func LoadPrincipal(tx kv.Tx, id string) (*Principal, error) {
	b, err := tx.Get(bucketPrincipals, []byte(id))
	if err != nil || b == nil {
		return nil, err
	}
	var p Principal
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("principal %s: %w", id, err)
	}
	return &p, nil
}

// SavePrincipal overwrites a stored principal. Once tx commits, every
// cached authentication is dropped (see Options.CachePrincipals), so a
// revocation holds from the moment the call that made it returns.
func SavePrincipal(tx *Tx, p Principal) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tx.principals = true
	return tx.Put(bucketPrincipals, []byte(p.ID), b)
}

// ListPrincipals returns every stored principal in id order.
func ListPrincipals(tx kv.Tx) ([]Principal, error) {
	var out []Principal
	err := tx.Ascend(bucketPrincipals, nil, nil, func(_, v []byte) error {
		var p Principal
		if err := json.Unmarshal(v, &p); err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// Authenticate resolves an API key to its principal. A missing, unknown or
// revoked key is a KindUnauthenticated error.
func (b *Bot) Authenticate(ctx context.Context, key string) (*Caller, error) {
	if key == "" {
		return nil, Errorf(KindUnauthenticated, "Access denied: authentication required. Provide a valid API key (Authorization: Bearer %s…).", KeyPrefix)
	}
	hash := hashKey(key)
	if b.authCache != nil {
		if p, ok := b.authCache.get(hash); ok {
			return &Caller{Principal: p}, nil
		}
	}
	gen := b.authGen.Load() // before the read: a change committed after it invalidates what is read
	var p *Principal
	err := b.store.View(ctx, func(tx kv.Tx) error {
		id, err := tx.Get(bucketKeys, []byte(hash))
		if err != nil || id == nil {
			return err
		}
		p, err = LoadPrincipal(tx, string(id))
		return err
	})
	if err != nil {
		return nil, err
	}
	if p == nil || p.Revoked {
		return nil, Errorf(KindUnauthenticated, "Access denied: unknown or revoked API key. Create one with `countersign keys create`.")
	}
	if b.authCache != nil {
		b.authCache.put(hash, *p, gen)
	}
	return &Caller{Principal: *p}, nil
}

// LocalAgent is the caller of a local session started without a key
// (`countersign mcp --local-agent`): the principal "local", of kind agent
// with the agent role, so that the one decision rule refuses every
// decision it attempts (an agent never decides) and its role holds no
// approve or admin capability. Nothing local decides or administers
// without an explicit credential.
func LocalAgent() *Caller {
	return &Caller{Principal: Principal{ID: "local", Name: "local", Role: policy.RoleAgent, Kind: "agent"}}
}

// PrincipalNamed returns the unrevoked stored principal named name (names
// compare exactly), or nil when there is none or more than one
// (PrincipalByName): an OAuth access token's subject names its principal
// so, and a name two principals share names neither.
func (b *Bot) PrincipalNamed(ctx context.Context, name string) (*Principal, error) {
	if ValidateName(name) != nil {
		return nil, nil
	}
	var found *Principal
	err := b.store.View(ctx, func(tx kv.Tx) error {
		p, err := PrincipalByName(tx, name)
		if k := KindOf(err); k == KindNotFound || k == KindConflict {
			return nil
		}
		found = p
		return err
	})
	return found, err
}
