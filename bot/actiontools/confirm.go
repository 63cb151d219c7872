package actiontools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
	"github.com/countersign/countersign/receipt"
)

// callCheck is what checkCall found about one tool call: its canonical
// arguments, the configured category and mechanics, the allowlist entry an
// exec command matched, or why it cannot be asked about.
type callCheck struct {
	canon     json.RawMessage
	cat       policy.Category
	mech      policy.Mechanics
	command   string   // the allowlist entry an exec call matched
	mechanics string   // the mechanics to report with a clarification
	missing   []string // required arguments not given: a clarification
	// refusal is why an exec command is refused outright: not on the
	// allowlist, or a read-only call with a flag its entry does not accept.
	refusal string
	def     *toolDef
}

// checkCall validates one call of tool with arguments obj the way every
// call is validated, whether an agent proposes it (confirm_action) or an
// approver edits it (approve_action with arguments): canonical form,
// required arguments, the exec allowlist (which fixes the category of an
// exec call), the configured category and its mechanics, the declared JSON
// Schema. A missing argument or a command off the allowlist is reported in
// the result (the callers answer those differently); anything else invalid
// is a 400 naming the field.
func (s *Service) checkCall(tool string, obj map[string]any) (callCheck, error) {
	def := s.def(tool)
	if obj == nil {
		obj = map[string]any{}
	}
	rawArgs, err := json.Marshal(obj)
	if err != nil {
		return callCheck{}, bot.Invalid("arguments", "cannot be encoded: %v", err)
	}
	canon, err := receipt.Canonical(rawArgs)
	if err != nil {
		return callCheck{}, bot.Invalid("arguments", "%v", err)
	}
	ck := callCheck{canon: canon, def: def}

	// 1. Clarification: nothing is asked of a person while parameters are
	// missing; the agent asks the user instead of guessing.
	var required []string
	exec := def != nil && len(def.commands) > 0
	if def != nil {
		required = slices.Clone(def.required)
	}
	if exec && !slices.Contains(required, "command") {
		required = append(required, "command")
	}
	if def == nil || !exec {
		cat := policy.ToolCategory(tool, def != nil, toolCategory(def), s.o.ReadOnlyPrefixes)
		ck.mechanics = string(policy.MechanicsFor(cat))
	}
	if ck.missing = policy.RequiredMissing(required, obj); len(ck.missing) > 0 {
		return ck, nil
	}

	// 2. The category: from config, or, for an exec-style tool, from the
	// allowlist entry the command matches. Not on the list: refused.
	if exec {
		toks, err := policy.CommandTokens(obj["command"])
		if errors.Is(err, policy.ErrNoCommand) {
			ck.mechanics, ck.missing = "", []string{"command"}
			return ck, nil
		}
		var ce *policy.CommandError
		if errors.As(err, &ce) {
			return callCheck{}, bot.Invalid("arguments.command", "%s", ce.Msg)
		}
		if err != nil {
			return callCheck{}, err
		}
		m, ok := policy.MatchCommand(def.commands, toks)
		if !ok {
			ck.refusal = notAllowlisted(def, toks)
			return ck, nil
		}
		if m.Unaccepted != "" {
			ck.refusal = policy.FlagRefusal(def.spec.Name, m)
			return ck, nil
		}
		ck.cat, ck.command = m.Category, m.Rule.String()
	} else {
		ck.cat = policy.ToolCategory(tool, def != nil, toolCategory(def), s.o.ReadOnlyPrefixes)
	}
	ck.mech = policy.MechanicsFor(ck.cat)

	// 3. The rest of the declared schema.
	if def != nil && def.schema != nil {
		var plain any
		if err := json.Unmarshal(canon, &plain); err != nil {
			return callCheck{}, bot.Invalid("arguments", "%v", err)
		}
		if err := def.schema.Validate(plain); err != nil {
			return callCheck{}, bot.Invalid("arguments", "do not match the declared schema of %s: %v", tool, err)
		}
	}
	return ck, nil
}

// confirm is confirm_action.
func (s *Service) confirm(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*ConfirmArgs)
	ck, err := s.checkCall(args.Tool, args.Arguments)
	switch {
	case err != nil:
		return bot.Result{}, err
	case len(ck.missing) > 0:
		return clarification(args.Tool, ck.mechanics, ck.missing), nil
	case ck.refusal != "":
		return bot.Result{}, c.Deny(ctx, ck.refusal)
	}
	def, canon, command := ck.def, ck.canon, ck.command

	// 4. A destructive call shows its plan first.
	if ck.mech == policy.MechanicsDryRunConfirm && !args.Headless && strings.TrimSpace(string(args.DryRun)) == "" {
		return bot.Result{}, bot.Invalid("dry_run", "%s is destructive: send the dry-run plan the approver reviews (what would be changed or deleted, and how much) in dry_run, then ask again. Nothing is asked of a person without a plan.", callName(args.Tool, command))
	}

	// 5. Callbacks go only to allowed hosts, signed.
	if args.CallbackURL != "" {
		if err := s.checkCallbackURL(ctx, c, args.CallbackURL); err != nil {
			return bot.Result{}, err
		}
	}

	fp := fingerprint(args, canon, c.Space)
	id, err := approvals.NewRequestID(approvals.KindActionRequest)
	if err != nil {
		return bot.Result{}, err
	}
	var req *approvals.Request
	var existing bool
	err = c.Update(ctx, func(tx *bot.Tx) error {
		req, existing = nil, false
		cat, mech := ck.cat, ck.mech // a rule may change them (rules.go)
		if args.ActionID != "" {
			prev, err := approvals.LookupActionID(tx, c.Caller.ID, args.ActionID)
			if err != nil {
				return err
			}
			if prev != "" {
				r, err := approvals.LoadRequest(tx, prev)
				if err != nil {
					return err
				}
				if r == nil || r.Action == nil {
					return fmt.Errorf("action_id %q points at missing request %s", args.ActionID, prev)
				}
				if r.Action.Fingerprint != fp {
					return &bot.Error{Kind: bot.KindConflict, Field: "action_id",
						Msg:  fmt.Sprintf("action_id %q already names request %s with a different body. An action_id stands for one exact request: send the same body to get %s again, or use a new action_id for a new request.", args.ActionID, prev, prev),
						Data: s.requestData(c.Caller.Decider(), r)}
				}
				req, existing = r, true
				return nil
			}
		}
		r := &approvals.Request{
			ID:          id,
			Kind:        approvals.KindActionRequest,
			Space:       c.Space,
			Requester:   party(c.Caller),
			Channel:     "default",
			CreatedAt:   c.Now,
			Status:      approvals.StatusPending,
			Quorum:      1,
			CallbackURL: args.CallbackURL,
			Action: &approvals.Action{
				Tool:             args.Tool,
				Arguments:        canon,
				ArgsSHA256:       receipt.HashCanonical(args.Tool, canon),
				Summary:          args.Summary,
				DryRun:           string(args.DryRun),
				RequestedEffects: args.RequestedEffects,
				StatedCategory:   args.Category,
				Category:         string(cat),
				Mechanics:        string(mech),
				Command:          command,
				Headless:         args.Headless,
				ActionID:         args.ActionID,
				Fingerprint:      fp,
			},
		}
		timeout := s.o.DefaultTimeout
		if def != nil {
			r.Approvers = def.spec.Approvers
			r.Quorum = max(def.spec.Quorum, 1)
			r.Channel = def.channel
			r.Action.Sensitive = def.spec.Sensitive
			r.Context = slices.Clone(def.context)
			timeout = def.timeout
		}
		r.StepUp = s.stepUp.requires(args.Tool, cat)
		if def != nil && def.minAssurance != "" {
			r.MinAssurance = def.minAssurance
			if def.minAssurance.AtLeast(policy.AssuranceStepUp) && r.StepUp == 0 {
				// A fresh authentication: the request requires step-up,
				// with all that comes with it (no grant, the console link).
				r.StepUp = s.stepUp.within
			}
		}
		r.ExpiresAt = c.Now.Add(timeout)
		if def != nil && (len(def.rules) > 0 || len(def.spec.Stages) > 0) {
			// Policy that reads the request: the first rule that matches
			// the call (facts as they stand in this transaction) sets it.
			var m ruleMatch
			if len(def.rules) > 0 {
				r.Requester.Scopes = slices.Clone(c.Caller.Scopes)
				r.Requester.Groups = slices.Clone(c.Caller.Decider().Groups)
				in, err := conditionInput(tx, def, args.Tool, canon, r.Requester, c.Caller.Scopes, c.Space, c.Now)
				if err != nil {
					return err
				}
				m = def.match(in)
			}
			s.applyRule(r, def, m, cat)
			cat, mech = policy.Category(r.Action.Category), policy.Mechanics(r.Action.Mechanics)
			r.StepUp = max(r.StepUp, s.stepUp.requires(args.Tool, cat))
			if mech == policy.MechanicsDryRunConfirm && !args.Headless && strings.TrimSpace(string(args.DryRun)) == "" {
				return bot.Invalid("dry_run", "%s is destructive under %s: send the dry-run plan the approver reviews (what would be changed or deleted, and how much) in dry_run, then ask again. Nothing is asked of a person without a plan.", callName(args.Tool, command), r.Rule)
			}
		}
		detail := fmt.Sprintf("%s %s category=%s mechanics=%s args_sha256=%s", r.ID, callName(args.Tool, command), cat, mech, r.Action.ArgsSHA256)
		if r.Rule != nil {
			detail += " " + r.Rule.String()
		}
		var due time.Time
		granted := false
		if mech != policy.MechanicsAuto {
			if granted, err = s.grantFor(tx, c, r, def); err != nil {
				return err
			}
		}
		switch {
		case granted: // approved under a standing grant (grants.go)
			// The grant's approval rests on the context facts as they
			// stand now, like a person's (facts.go).
			if r.Facts, _, err = contextFacts(tx, r.Space, r.Context, c.Now); err != nil {
				return err
			}
		case mech == policy.MechanicsAuto:
			r.Status = approvals.StatusApproved
			r.Reason = "read-only: approved automatically, no confirmation needed"
			r.DecidedAt = c.Now
			r.ExpiresAt = time.Time{}
			if err := tx.Audit("action_auto_approved", detail); err != nil {
				return err
			}
		case args.Headless:
			r.Close(approvals.StatusDenied, policy.HeadlessDenial(cat), c.Now)
			r.ExpiresAt = time.Time{}
			if err := tx.Audit("action_denied_automatic", detail+" headless"); err != nil {
				return err
			}
		default:
			item, err := tx.NewItem(bot.KindAction, r.ID, c.Space, r.Channel, r.ExpiresAt)
			if err != nil {
				return err
			}
			r.ItemID = item
			if err := postStage(tx, r); err != nil { // the first stage's channels
				return err
			}
			due = r.NextDue(s.o.RemindAfter, s.o.EscalateAfter)
			if err := tx.Audit("action_requested", detail); err != nil {
				return err
			}
		}
		if err := approvals.PutRequest(tx, r, due); err != nil {
			return err
		}
		if args.ActionID != "" {
			if err := approvals.PutActionID(tx, c.Caller.ID, args.ActionID, r.ID); err != nil {
				return err
			}
		}
		req = r
		return nil
	})
	if err != nil {
		return bot.Result{}, err
	}
	res := s.render(c.Caller.Decider(), req)
	if existing {
		res.Text = "Same action_id and body as before: this is request " + req.ID + ". " + res.Text
	}
	return res, nil
}

func toolCategory(def *toolDef) policy.Category {
	if def == nil {
		return policy.CategoryUnclassified
	}
	return def.category
}

// callName names a call for people: the tool, and an exec call's command.
func callName(tool, command string) string {
	if command != "" {
		return fmt.Sprintf("%s (%s)", tool, command)
	}
	return tool
}

func clarification(tool, mechanics string, missing []string) bot.Result {
	text := policy.Clarification(missing)
	return bot.Result{
		Text: text,
		Data: map[string]any{
			"status":       "requires_clarification",
			"missing":      missing,
			"tool":         tool,
			"request_id":   "",
			"mechanics":    mechanics,
			"confirmed_by": "",
			"reason":       text,
		},
	}
}

// notAllowlisted is the refusal of an exec command that is not on the
// allowlist: it says what runs, that the refusal is by design, and who can
// change the list.
func notAllowlisted(def *toolDef, toks []string) string {
	shown := strings.Join(toks[:min(len(toks), 2)], " ")
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	allowed := make([]string, len(def.commands))
	for i, r := range def.commands {
		allowed[i] = fmt.Sprintf("%s (%s)", r, r.Category)
	}
	return fmt.Sprintf("Access denied: %q is not on the command allowlist of %s, so it is refused, not asked about. %s runs only: %s. That is by design: an allowlist leaves nothing to talk around. To run something else, ask an operator to add it to tools[].commands in config.yaml.",
		shown, def.spec.Name, def.spec.Name, strings.Join(allowed, ", "))
}

// checkCallbackURL accepts an http(s) URL allowed by callbacks.allowed_hosts,
// and only when the callback can be signed: with the caller's own callback
// secret, or (for a principal created before those) the deployment's.
func (s *Service) checkCallbackURL(ctx context.Context, c *bot.Call, raw string) error {
	secret, err := s.callbackSecret(ctx, c.Caller.ID)
	if errors.Is(err, bot.ErrSecretSealedElsewhere) {
		return bot.Invalid("callback_url", "your callback secret cannot be read: %v (for %s); until then poll action_status instead", err, c.Caller.Name)
	}
	if err != nil {
		return err
	}
	if len(secret) == 0 {
		return bot.Invalid("callback_url", "callbacks are not configured for you: Countersign signs every callback with the requester's own secret, and %s has none (it was created before per-principal secrets). An operator runs `countersign keys rotate-callback-secret --name %s` or the rotate_callback_secret tool and gives you the secret it prints; until then poll action_status instead", c.Caller.Name, c.Caller.Name)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bot.Invalid("callback_url", "must be an absolute http or https URL, such as https://agent.example/callbacks")
	}
	if u.User != nil {
		return bot.Invalid("callback_url", "must not carry credentials; callbacks are authenticated by their signature")
	}
	if !s.hostAllowed(u) {
		return bot.Invalid("callback_url", "%s://%s is not allowed by callbacks.allowed_hosts: the scheme, host and port (and the path, for a URL prefix) must match an entry; Countersign calls back only where an operator allowed", u.Scheme, u.Host)
	}
	return nil
}

// hostAllowed reports whether u matches an entry of callbacks.allowed_hosts.
func (s *Service) hostAllowed(u *url.URL) bool {
	for _, r := range s.allow {
		if r.matches(u) {
			return true
		}
	}
	return false
}

// fingerprint identifies a confirm_action body for idempotency.
func fingerprint(a *ConfirmArgs, canonArgs []byte, sp bot.Space) string {
	effects := a.RequestedEffects
	if len(effects) == 0 {
		effects = nil
	}
	b, _ := json.Marshal([]any{sp.UserID, sp.AgentID, sp.RunID, a.Tool, string(canonArgs), a.Summary, a.Category,
		effects, string(a.DryRun), a.CallbackURL, a.Headless})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
