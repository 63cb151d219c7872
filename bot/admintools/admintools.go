// Package admintools registers the accountability tools (audit_log,
// verify_audit, export_public_key) and the administration tools
// (create_principal, list_principals, revoke_principal; list_suspensions,
// suspend_principal, lift_suspension) on a bot.
package admintools

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// Limits of audit_log.
const (
	DefaultAuditLimit = 50
	MaxAuditLimit     = 1000
)

// DenyDeploymentAudit is the refusal of a deployment-wide audit_log to a
// caller who is neither an admin nor an unscoped auditor.
const DenyDeploymentAudit = "Access denied: the deployment-wide audit log is for the 'admin' role and for auditors without scopes. Pass a user_id within your scope to see that space's trail."

// Options are what verify_audit checks besides the chain itself.
type Options struct {
	// AnchorFile is the audit anchor file (audit.anchor.file); empty: none.
	AnchorFile string
	// StateBuckets are buckets written only with an audit entry: content in
	// them next to an empty chain breaks it (approvals.VerifyOptions).
	StateBuckets []string
}

// Register adds the accountability and administration tools to b, with
// no anchor file.
func Register(b *bot.Bot) error { return RegisterWith(b, Options{}) }

// RegisterWith adds the accountability and administration tools to b;
// verify_audit checks the chain against o.
func RegisterWith(b *bot.Bot, o Options) error {
	verifyAudit := func(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
		return verifyAuditWith(ctx, c, o)
	}
	if err := b.Register(suspensionTools()...); err != nil {
		return err
	}
	if err := b.Register(delegationTools()...); err != nil { // delegations.go
		return err
	}
	return b.Register(
		bot.Tool{
			Name:        "audit_log",
			Description: "List audit entries, newest first. With user_id, that memory space's trail (within your scope); without, the whole deployment's (admin, or an auditor without scopes).",
			Capability:  policy.CapVerify,
			Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
			Args:        AuditLogArgs{},
			Handler:     auditLog,
		},
		bot.Tool{
			Name:        "verify_audit",
			Description: "Recompute the whole audit chain (hashes, links, Ed25519 signatures, signed head, genesis, key rotations) and check it against the anchors kept outside the store; report the first break, if any.",
			Capability:  policy.CapVerify,
			Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
			Args:        NoArgs{},
			Handler:     verifyAudit,
		},
		bot.Tool{
			Name:        "export_public_key",
			Description: "The Ed25519 public key that verifies the audit chain's signatures, in hex, and every key the chain has used with the entries each signed.",
			Capability:  policy.CapVerify,
			Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
			Args:        NoArgs{},
			Handler:     exportPublicKey,
		},
		bot.Tool{
			Name:        "create_principal",
			Description: "Create a principal (a person, agent or service) with one role and optional scopes, and return its API key, shown once.",
			Capability:  policy.CapAdmin,
			Args:        CreatePrincipalArgs{},
			Handler:     createPrincipal,
		},
		bot.Tool{
			Name:        "list_principals",
			Description: "List the principals that hold API keys, revoked ones marked (disabled).",
			Capability:  policy.CapAdmin,
			Annotations: bot.Annotations{ReadOnly: true, Idempotent: true},
			Args:        NoArgs{},
			Handler:     listPrincipals,
		},
		bot.Tool{
			Name:        "rotate_callback_secret",
			Description: "Give a principal a new callback signing secret, shown once; callbacks of its requests are signed with it from the next delivery, and the old one stops verifying.",
			Capability:  policy.CapAdmin,
			Args:        RotateCallbackSecretArgs{},
			Handler:     rotateCallbackSecret,
		},
		bot.Tool{
			Name:        "revoke_principal",
			Description: "Revoke a principal: its API key stops working at once. There is no un-revoke; create a new principal instead.",
			Capability:  policy.CapAdmin,
			Annotations: bot.Annotations{Destructive: true, Idempotent: true},
			Args:        RevokePrincipalArgs{},
			Handler:     revokePrincipal,
		},
	)
}

// NoArgs is the argument struct of a tool that takes none.
type NoArgs struct{}

// AuditLogArgs are audit_log's arguments. It does not embed bot.Space: an
// empty user_id here means the whole deployment, not the "default" space.
type AuditLogArgs struct {
	Limit   *int   `json:"limit,omitempty" jsonschema:"how many entries, newest first (default 50, at most 1000)"`
	UserID  string `json:"user_id,omitempty" jsonschema:"only this memory space's trail; empty means the whole deployment (admin, or an auditor without scopes)"`
	AgentID string `json:"agent_id,omitempty" jsonschema:"only entries of this agent_id"`
	RunID   string `json:"run_id,omitempty" jsonschema:"only entries of this run_id"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"where to continue: the next_cursor of the previous page (entries older than that sequence number); omit for the newest"`
}

// Validate checks the limit and the space identifiers.
func (a *AuditLogArgs) Validate() error {
	if a.Limit != nil && (*a.Limit < 1 || *a.Limit > MaxAuditLimit) {
		return bot.Invalid("limit", "must be between 1 and %d", MaxAuditLimit)
	}
	if _, err := a.before(); err != nil {
		return err
	}
	return bot.ValidateSpace(bot.Space{UserID: a.UserID, AgentID: a.AgentID, RunID: a.RunID})
}

// before returns the sequence number the page ends before (0: the newest).
func (a *AuditLogArgs) before() (uint64, error) {
	if a.Cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(a.Cursor, 10, 64)
	if err != nil || n == 0 {
		return 0, bot.Invalid("cursor", "must be the next_cursor of a previous answer (a sequence number such as \"120\"), or omitted for the newest entries")
	}
	return n, nil
}

func auditLog(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	a := args.(*AuditLogArgs)
	if a.UserID == "" && !c.Caller.SeesWholeAudit() {
		return bot.Result{}, c.Deny(ctx, DenyDeploymentAudit)
	}
	if a.UserID != "" && !policy.InScope(c.Caller.Role, c.Caller.Scopes, a.UserID) {
		return bot.Result{}, c.Refuse(ctx, &policy.Refusal{Check: policy.CheckScope, Message: policy.DenyScope(c.Tool.Name)})
	}
	limit := DefaultAuditLimit
	if a.Limit != nil {
		limit = *a.Limit
	}
	before, _ := a.before() // checked by Validate
	var entries []approvals.Entry
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		// One more than the page: whether there is a next one.
		entries, err = approvals.List(tx, approvals.Filter{UserID: a.UserID, AgentID: a.AgentID, RunID: a.RunID, Before: before, Limit: limit + 1})
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	next := ""
	if len(entries) > limit {
		entries = entries[:limit]
		next = strconv.FormatUint(entries[len(entries)-1].Seq, 10)
	}
	if entries == nil {
		entries = []approvals.Entry{}
	}
	data := map[string]any{"count": len(entries), "entries": entries, "next_cursor": next}
	if len(entries) == 0 {
		return bot.Result{Text: "No audit entries.", Data: data}, nil
	}
	var sb strings.Builder
	for i, e := range entries {
		if i > 0 {
			sb.WriteByte('\n')
		}
		user := e.UserID
		if user == "" {
			user = "-"
		}
		fmt.Fprintf(&sb, "#%d  %s  %-18s user=%s  by %s  %s", e.Seq, e.TS, oneLine(e.Action), oneLine(user), oneLine(e.Principal), oneLine(e.Detail))
	}
	if next != "" {
		fmt.Fprintf(&sb, "\n… more: call audit_log again with cursor \"%s\".", next)
	}
	return bot.Result{Text: sb.String(), Data: data}, nil
}

// oneLine escapes control characters (and the Unicode line and paragraph
// separators), so that stored text can never forge a line of the listing.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, needsEscape) {
		return s
	}
	var sb strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case needsEscape(r):
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func needsEscape(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r)
}

func verifyAuditWith(ctx context.Context, c *bot.Call, o Options) (bot.Result, error) {
	vo := approvals.VerifyOptions{Trusted: []ed25519.PublicKey{c.Bot().PublicKey()}, StateBuckets: o.StateBuckets}
	anchorNote := ""
	if o.AnchorFile != "" {
		anchors, err := approvals.ReadAnchors(o.AnchorFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
			anchorNote = "\n  anchors: none yet in " + o.AnchorFile
		case err != nil:
			return bot.Result{Text: "⚠ Audit anchors unreadable: " + err.Error(), Data: map[string]any{"intact": false, "reason": err.Error()}}, nil
		default:
			vo.Anchors = anchors
		}
	}
	rep, err := approvals.VerifyWith(ctx, c.Bot().Store(), vo)
	if err != nil {
		return bot.Result{}, err
	}
	if !rep.Intact {
		return bot.Result{Text: fmt.Sprintf("⚠ Audit chain BROKEN at seq %d: %s.", rep.BrokenAt, rep.Reason), Data: rep}, nil
	}
	if rep.Anchors > 0 {
		anchorNote = fmt.Sprintf("\n  anchors: %d checked, the newest at seq %d (%s)", rep.Anchors, rep.NewestAnchor.Seq, rep.NewestAnchor.Time)
	}
	if rep.Checkpoint > 0 {
		anchorNote += fmt.Sprintf("\n  checkpoint: seq 1–%d archived; verified from there", rep.Checkpoint)
	}
	return bot.Result{Text: fmt.Sprintf("✓ Audit chain INTACT — %d entries verified.", rep.Entries) + anchorNote, Data: rep}, nil
}

func exportPublicKey(ctx context.Context, c *bot.Call, _ any) (bot.Result, error) {
	pub := c.Bot().PublicKey()
	h := hex.EncodeToString(pub)
	var keys []approvals.KeySpan
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		keys, err = approvals.Keys(tx, pub)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	text := "Ed25519 public key (hex):\n" + h
	if len(keys) > 1 {
		var sb strings.Builder
		sb.WriteString("\n\nKeys the chain has used (pin every one you trust):")
		for i, k := range keys {
			to := fmt.Sprint(k.To)
			if i == len(keys)-1 {
				to = "now"
			}
			fmt.Fprintf(&sb, "\n  seq %d–%s: %s", k.From, to, k.PublicKey)
		}
		text += sb.String()
	}
	return bot.Result{
		Text: text,
		Data: map[string]any{"algorithm": "Ed25519", "public_key": h, "keys": keys},
	}, nil
}

// CreatePrincipalArgs are create_principal's arguments.
type CreatePrincipalArgs struct {
	Name   string  `json:"name" jsonschema:"the principal's name: 1-64 letters, digits, '_', '-', '.' or ':'; a trusted source's key is named after the source (for example fhir)"`
	Role   *string `json:"role,omitempty" jsonschema:"admin, member, agent, viewer or auditor (default member)"`
	Kind   *string `json:"kind,omitempty" jsonschema:"agent, person or service (default person for admin and member, agent otherwise)"`
	Scopes string  `json:"scopes,omitempty" jsonschema:"comma-separated user_ids the key may touch; leave it out (or *) for all; a list that names no user_id (,,) is refused"`
}

// PrincipalView is a principal as the administration tools show it. Key is
// set only in create_principal's answer.
type PrincipalView struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Kind      string     `json:"kind"`
	Scopes    []string   `json:"scopes"`
	Revoked   bool       `json:"revoked"`
	CreatedAt string     `json:"created_at"`
	Key       bot.Secret `json:"key,omitempty"`
	// CallbackSecret is shown once, at creation: it verifies the signed
	// callbacks of this principal's requests.
	CallbackSecret bot.Secret `json:"callback_secret,omitempty"`
}

func viewOf(p bot.Principal) PrincipalView {
	scopes := p.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return PrincipalView{ID: p.ID, Name: p.Name, Role: string(p.Role), Kind: p.Kind, Scopes: scopes, Revoked: p.Revoked, CreatedAt: p.CreatedAt.UTC().Format("2006-01-02T15:04:05Z")}
}

func createPrincipal(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	a := args.(*CreatePrincipalArgs)
	roleName := "member"
	if a.Role != nil {
		roleName = *a.Role
	}
	role, err := policy.ParseRole(roleName)
	if err != nil {
		return bot.Result{}, bot.Invalid("role", "%v", err)
	}
	kind := ""
	if a.Kind != nil {
		kind = *a.Kind
	}
	scopes, err := bot.ParseScopes(a.Scopes)
	if err != nil {
		return bot.Result{}, err
	}
	var made bot.CreatedKey
	err = c.Update(ctx, func(tx *bot.Tx) error {
		var err error
		made, err = bot.CreateKey(tx, c.Now, bot.NewKey{Name: a.Name, Role: role, Kind: kind, Scopes: scopes})
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	p, key, cbSecret := made.Principal, made.Key, made.CallbackSecret
	scopeNote := ""
	if len(p.Scopes) > 0 {
		scopeNote = ", scopes: " + strings.Join(p.Scopes, ",")
	}
	v := viewOf(p)
	v.Key = bot.Secret(key)
	v.CallbackSecret = bot.Secret(cbSecret)
	text := fmt.Sprintf("Created principal %s '%s' (role: %s, kind: %s%s).\n  API key (shown once — save it now):\n  %s\n  Callback signing secret (shown once; verifies the callbacks of its requests):\n  %s", p.ID, p.Name, p.Role, p.Kind, scopeNote, key, cbSecret)
	return bot.Result{Text: text, Data: v}, nil
}

func listPrincipals(ctx context.Context, c *bot.Call, _ any) (bot.Result, error) {
	var ps []bot.Principal
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		ps, err = bot.ListPrincipals(tx)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	slices.SortStableFunc(ps, func(a, b bot.Principal) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	views := make([]PrincipalView, 0, len(ps))
	var sb strings.Builder
	for i, p := range ps {
		views = append(views, viewOf(p))
		if i > 0 {
			sb.WriteByte('\n')
		}
		mark := "•"
		if p.Revoked {
			mark = "✗"
		}
		fmt.Fprintf(&sb, "%s %s  %s  [%s]  %s", mark, p.ID, oneLine(p.Name), p.Role, p.Kind)
		if len(p.Scopes) > 0 {
			fmt.Fprintf(&sb, "  scopes: %s", oneLine(strings.Join(p.Scopes, ",")))
		}
		if p.Revoked {
			sb.WriteString("  (disabled)")
		}
	}
	data := map[string]any{"count": len(views), "principals": views}
	if len(ps) == 0 {
		return bot.Result{Text: "No principals yet. Create one with create_principal.", Data: data}, nil
	}
	return bot.Result{Text: sb.String(), Data: data}, nil
}

// RevokePrincipalArgs are revoke_principal's arguments.
type RevokePrincipalArgs struct {
	PrincipalID string `json:"principal_id" jsonschema:"the principal's id, as list_principals shows it (for example prin_526651e03f93)"`
}

// Validate checks that the id looks like an id, so that nothing else is
// echoed back.
func (a *RevokePrincipalArgs) Validate() error {
	if a.PrincipalID == "" || len(a.PrincipalID) > 64 || strings.ContainsFunc(a.PrincipalID, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) {
		return bot.Invalid("principal_id", "is not a principal id; list_principals shows them (for example prin_526651e03f93)")
	}
	return nil
}

func revokePrincipal(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	id := args.(*RevokePrincipalArgs).PrincipalID
	revoked := false
	var name string
	err := c.Update(ctx, func(tx *bot.Tx) error {
		revoked, name = false, "" // the function may run twice under group commit
		p, err := bot.LoadPrincipal(tx, id)
		if err != nil || p == nil || p.Revoked {
			return err
		}
		p.Revoked, name = true, p.Name
		if err := bot.SavePrincipal(tx, *p); err != nil {
			return err
		}
		revoked = true
		return tx.Audit("revoke_principal", fmt.Sprintf("%s %q", p.ID, p.Name))
	})
	if err != nil {
		return bot.Result{}, err
	}
	data := map[string]any{"id": id, "revoked": revoked}
	if !revoked {
		return bot.Result{Text: fmt.Sprintf("No active principal %s (unknown or already revoked).", id), Data: data}, nil
	}
	data["name"] = name
	return bot.Result{Text: fmt.Sprintf("Revoked %s — its API key no longer works.", id), Data: data}, nil
}

// RotateCallbackSecretArgs are rotate_callback_secret's arguments.
type RotateCallbackSecretArgs struct {
	Name string `json:"name" jsonschema:"the principal's name, as list_principals shows it"`
}

// Validate checks the name.
func (a *RotateCallbackSecretArgs) Validate() error {
	if err := bot.ValidateName(a.Name); err != nil {
		return bot.Invalid("name", "%v", err)
	}
	return nil
}

func rotateCallbackSecret(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
	name := args.(*RotateCallbackSecretArgs).Name
	var p bot.Principal
	var secret string
	err := c.Update(ctx, func(tx *bot.Tx) error {
		var err error
		p, secret, err = bot.RotateCallbackSecret(tx, name, "")
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	return bot.Result{
		Text: fmt.Sprintf("New callback signing secret for %s '%s' (shown once; the old one no longer verifies):\n  %s", p.ID, p.Name, secret),
		Data: map[string]any{"id": p.ID, "name": p.Name, "callback_secret": bot.Secret(secret)},
	}, nil
}
