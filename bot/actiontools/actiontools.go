// Package actiontools registers the action-approval tools (confirm_action,
// action_status, approve_action, deny_action), structured questions
// (ask_user, answer_question), soft approval (request_approval,
// record_approval, set_approval_mode, get_approval_mode), the chat item
// sources of their requests, the "actions" sweep step, and the delivery of
// signed callbacks.
//
// The mechanics of a call come from the tool's configured category, never
// from the agent's words; the approver recorded is the authenticated caller
// who decided, never an argument.
package actiontools

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
	"github.com/google/jsonschema-go/jsonschema"
)

// CallbackSink is the outbox sink of signed callbacks: run its worker
// (bot.Outbox.Run) with Service.DeliverCallback.
const CallbackSink = "callback"

// CommandSpec is one allowlisted command of an exec-style tool.
type CommandSpec struct {
	Command  string // "kubectl get"
	Category string // read-only, mutating or destructive
	// Flags are the flags a read-only command accepts (policy.CommandRule);
	// any other flag refuses the call.
	Flags []string
}

// ToolSpec declares one agent tool that goes through the confirm gate.
type ToolSpec struct {
	Name string
	// Category is read-only, mutating or destructive; empty is unclassified
	// (a confirmation, the safe default).
	Category string
	// Schema is the JSON Schema of the tool's arguments; its required list
	// drives REQUIRES_CLARIFICATION, and the rest is validated too.
	Schema    map[string]any
	Approvers approvals.Approvers
	Quorum    int           // distinct approvers needed; 0 means 1
	Timeout   time.Duration // 0 means Options.DefaultTimeout
	Channels  []string      // the first one receives its requests; none means "default"
	Sensitive bool
	// Commands makes the tool exec-style: only these commands may run, each
	// with its own category; anything else is refused outright.
	Commands []CommandSpec
	// Grants are the standing grants an approver may make with an
	// approval (grants.go); the zero value allows none.
	Grants GrantPolicy
	// Context are memory subjects (in the request's space) its approvals
	// rest on (tools[].context): each card shows their values and
	// verdicts, each approval records their versions, and a receipt is
	// not redeemed once one of them changed (facts.go).
	Context []string
	// Rules are CEL conditions on the call (rules.go), in order: the
	// first that matches sets the request's policy keys.
	Rules []RuleSpec
	// Stages, when set, are the ordered sign-off every request of the
	// tool needs (a matching rule's stages replace them).
	Stages []StageSpec
	// StepUpMethod, when set, is the least assurance an approval of its
	// requests needs (tools[].step_up.method: oidc, oidc_step_up or
	// passkey; policy.ParseAssurance). A fresh one (oidc_step_up,
	// passkey) makes its requests require step-up too.
	StepUpMethod string
}

// MaxContext is the most context subjects a tool declares.
const MaxContext = 8

// Options configure the service. Zero durations take the documented
// defaults (timeout 30m; no reminder; no escalation).
type Options struct {
	Tools []ToolSpec
	// Lookup declares the tools Tools does not name, by rule rather than
	// by name (the MCP gateway's upstream tools, classified by
	// gateway.upstreams[].tools): it returns the spec of tool, or false
	// for a tool no rule covers (undeclared: a confirmation). A spec is
	// compiled on first use and kept; one that does not compile is
	// logged and treated as unclassified (a confirmation), so check the
	// rules at start with CheckSpec.
	Lookup func(tool string) (ToolSpec, bool)
	// ReadOnlyPrefixes treats undeclared tools named get_, find_, list_,
	// search_, read_ or fetch_ as read-only.
	ReadOnlyPrefixes bool
	DefaultTimeout   time.Duration
	RemindAfter      time.Duration
	// ReminderChannel, when set, is a surface that posts no card the
	// reminder also goes to ("email"): its note names it (channel=…).
	ReminderChannel   string
	EscalateAfter     time.Duration
	EscalationChannel string
	EscalationRole    string
	// EscalationOnCall, when set, names the oncall: rotation an escalation
	// is addressed to: whoever is on call in it at the time of the
	// escalation (the sweep's clock), mentioned on every surface and the
	// one person emailed (bot/oncall.go).
	EscalationOnCall string
	// CallbackSecret signs callbacks (see ParseSecret). Nil: a call that
	// asks for a callback is refused.
	CallbackSecret []byte
	// CallbackSecretEnv names the variable the secret comes from, for
	// messages.
	CallbackSecretEnv string
	// CallbackHosts are the callbacks.allowed_hosts entries a callback_url
	// must match (ParseCallbackAllow): a host (default ports only),
	// host:port, or a URL prefix.
	CallbackHosts []string
	// HTTPClient posts callbacks; nil means a client with a 15s timeout
	// that does not follow redirects.
	HTTPClient *http.Client
	// DefaultApprovalMode is the soft-approval mode of a space nobody set;
	// empty means normal.
	DefaultApprovalMode policy.ApprovalMode
	// SpaceApprovalModes are configured defaults for the spaces of one
	// user_id; they win over DefaultApprovalMode, and set_approval_mode
	// wins over both, from the next call on.
	SpaceApprovalModes map[string]policy.ApprovalMode
	// Retention says how long closed requests and action_id records are
	// kept (the "retention_requests" and "retention_action_ids" sweep
	// steps); zero keeps them.
	Retention Retention
	// MaxArgumentsBytes and MaxDryRunBytes bound confirm_action's
	// arguments and dry_run (bytes of JSON; 0: DefaultMaxArgBytes).
	MaxArgumentsBytes int
	MaxDryRunBytes    int
	// StepUp names the requests whose approval needs a fresh sign-in
	// (stepup.go); zero: none.
	StepUp StepUpSpec
	// BreakGlass lets a person approve their own request of the tools
	// it lists (breakglass.go); zero: nobody may.
	BreakGlass BreakGlassSpec
	// Subject resolves a context subject the way the memory does (a
	// declared slot's name for an alias, else the folded subject); nil
	// folds it (memory.Fold).
	Subject func(string) string
}

// Retention is how long each kind of closed request is kept after it
// closed (decided, answered, expired), and how long an action_id record
// outlives its request's decision. Zero keeps them for ever.
type Retention struct {
	Actions   time.Duration // action requests (confirm_action)
	Consents  time.Duration // consent requests (request_approval, record_approval)
	Questions time.Duration // ask_user questions
	ActionIDs time.Duration // action_id records of closed requests
}

// DefaultMaxArgBytes is the default bound of confirm_action's arguments and
// dry_run: 64 KiB of JSON.
const DefaultMaxArgBytes = 64 << 10

// Service holds the compiled tool declarations and the in-process notifier
// that wakes long polls.
type Service struct {
	b      *bot.Bot
	o      Options
	tools  map[string]*toolDef
	allow  []allowRule // callbacks.allowed_hosts
	client *http.Client
	waits  *notifier
	stepUp stepUpRule
	// ruled caches the compiled specs of Options.Lookup by tool name.
	ruled sync.Map
}

// def is the declaration of tool: a declared tool's, else the one
// Options.Lookup gives (compiled once), else nil (undeclared).
func (s *Service) def(tool string) *toolDef {
	if d := s.tools[tool]; d != nil {
		return d
	}
	if s.o.Lookup == nil {
		return nil
	}
	if d, ok := s.ruled.Load(tool); ok {
		return d.(*toolDef)
	}
	spec, ok := s.o.Lookup(tool)
	if !ok {
		return nil
	}
	spec.Name = tool
	d, err := compileTool(spec, s.o.DefaultTimeout, s.o.Subject)
	if err != nil {
		s.b.Logger().Error("a tool rule does not compile; its tool is unclassified (a confirmation)", "tool", tool, "err", err)
		d, _ = compileTool(ToolSpec{Name: tool}, s.o.DefaultTimeout, s.o.Subject)
	}
	got, _ := s.ruled.LoadOrStore(tool, d)
	return got.(*toolDef)
}

// CheckSpec reports every problem of spec as Register would (a rule's
// spec, before any tool it covers is called).
func CheckSpec(spec ToolSpec, defaultTimeout time.Duration) error {
	if spec.Name == "" {
		spec.Name = "rule"
	}
	_, err := compileTool(spec, defaultTimeout, memory.Fold)
	return err
}

// toolDef is a compiled ToolSpec.
type toolDef struct {
	spec     ToolSpec
	category policy.Category
	required []string
	schema   *jsonschema.Resolved
	commands []policy.CommandRule
	timeout  time.Duration
	channel  string
	context  []string // resolved context subjects
	rules    []*rule  // compiled Rules (rules.go)
	// ruleFacts are the subjects the rules' conditions read, by the name
	// a condition uses (facts.X) to the subject the memory stores it
	// under (an alias resolved to its slot).
	ruleFacts map[string]string
	// minAssurance is StepUpMethod, parsed; "" for none.
	minAssurance policy.Assurance
}

// Register compiles the declarations in o, adds the tools, item sources and
// the "actions" sweep step to b, and returns the service. Every problem of
// the declarations is reported at once.
func Register(b *bot.Bot, o Options) (*Service, error) {
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = 30 * time.Minute
	}
	if o.DefaultApprovalMode == "" {
		o.DefaultApprovalMode = policy.DefaultApprovalMode
	}
	if _, err := policy.ParseApprovalMode(string(o.DefaultApprovalMode)); err != nil {
		return nil, fmt.Errorf("default approval mode: %w", err)
	}
	for user, m := range o.SpaceApprovalModes {
		if _, err := policy.ParseApprovalMode(string(m)); err != nil {
			return nil, fmt.Errorf("approval mode of user_id %q: %w", user, err)
		}
	}
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"action_requests", o.Retention.Actions}, {"consent_requests", o.Retention.Consents}, {"questions", o.Retention.Questions}, {"idempotency", o.Retention.ActionIDs}} {
		if r.d < 0 {
			return nil, fmt.Errorf("retention.%s: must not be negative (0 keeps them)", r.name)
		}
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{
			Timeout:       15 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	s := &Service{b: b, o: o, tools: map[string]*toolDef{}, client: client, waits: newNotifier()}
	var errs []error
	for i, h := range o.CallbackHosts {
		r, err := ParseCallbackAllow(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("callbacks.allowed_hosts[%d]: %w", i, err))
			continue
		}
		s.allow = append(s.allow, r)
	}
	if o.Subject == nil {
		o.Subject = memory.Fold
	}
	s.o.Subject = o.Subject
	for i, t := range o.Tools {
		def, err := compileTool(t, o.DefaultTimeout, o.Subject)
		if err != nil {
			errs = append(errs, fmt.Errorf("tools[%d] (%s): %w", i, t.Name, err))
			continue
		}
		if _, dup := s.tools[t.Name]; dup {
			errs = append(errs, fmt.Errorf("tools[%d]: %q is declared twice", i, t.Name))
			continue
		}
		s.tools[t.Name] = def
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rule, err := compileStepUp(o.StepUp, s.tools)
	if err != nil {
		return nil, err
	}
	s.stepUp = rule
	if err := b.Register(append(s.toolList(), append(s.grantTools(), s.pendingTool())...)...); err != nil {
		return nil, err
	}
	b.Items().RegisterKind(bot.KindAction, itemSource{s})
	b.Items().RegisterKind(bot.KindConsent, itemSource{s})
	b.Items().RegisterKind(bot.KindQuestion, itemSource{s})
	if err := s.registerBreakGlass(b); err != nil {
		return nil, err
	}
	b.OnSweep("actions", s.Sweep)
	b.OnSweep("retention_requests", s.PruneRequests)
	b.OnSweep("retention_action_ids", s.PruneActionIDs)
	b.OnSweep("grants", s.PruneGrants)
	b.OnSuspend(revokeGrantsOf)
	return s, nil
}

func compileTool(t ToolSpec, defaultTimeout time.Duration, subject func(string) string) (*toolDef, error) {
	var errs []error
	if strings.TrimSpace(t.Name) == "" {
		errs = append(errs, errors.New("name: required"))
	}
	cat, err := policy.ParseCategory(t.Category)
	if err != nil {
		errs = append(errs, fmt.Errorf("category: %w", err))
	}
	def := &toolDef{spec: t, category: cat, timeout: t.Timeout, channel: "default"}
	if def.timeout <= 0 {
		def.timeout = defaultTimeout
	}
	if len(t.Channels) > 0 && t.Channels[0] != "" {
		def.channel = t.Channels[0]
	}
	if t.Quorum < 0 {
		errs = append(errs, errors.New("quorum: must be at least 1"))
	}
	if t.Schema != nil {
		req, res, err := compileSchema(t.Schema)
		if err != nil {
			errs = append(errs, fmt.Errorf("schema: %w", err))
		}
		def.required, def.schema = req, res
	}
	for j, c := range t.Commands {
		r, err := policy.ParseCommandRule(c.Command, c.Category, c.Flags)
		if err != nil {
			errs = append(errs, fmt.Errorf("commands[%d]: %w", j, err))
			continue
		}
		def.commands = append(def.commands, r)
	}
	if err := grantsOf(t, cat); err != nil {
		errs = append(errs, err)
	}
	if t.StepUpMethod != "" {
		a, err := policy.ParseAssurance(t.StepUpMethod)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("step_up.method: %w", err))
		case len(t.Grants.Allow) > 0:
			errs = append(errs, fmt.Errorf("step_up.method: %s asks every approval for %s, and a standing grant (grants.allow) would approve later calls without one; remove one of them", t.Name, a.Label()))
		}
		def.minAssurance = a
	}
	if len(t.Context) > MaxContext {
		errs = append(errs, fmt.Errorf("context: %d subjects; at most %d (each is read on every card and approval)", len(t.Context), MaxContext))
	}
	for j, c := range t.Context {
		sub := subject(strings.TrimSpace(c))
		switch {
		case sub == "":
			errs = append(errs, fmt.Errorf("context[%d]: empty; name a memory subject, such as allergy", j))
		case slices.Contains(def.context, sub):
			errs = append(errs, fmt.Errorf("context[%d]: %q is listed twice", j, c))
		default:
			def.context = append(def.context, sub)
		}
	}
	errs = append(errs, checkApprovers("approvers", t.Approvers)...)
	rules, facts, err := compileRules(t)
	if err != nil {
		errs = append(errs, err)
	}
	def.rules = rules
	for _, f := range facts {
		if sub := subject(f); sub != "" {
			if def.ruleFacts == nil {
				def.ruleFacts = map[string]string{}
			}
			def.ruleFacts[f] = sub
		}
	}
	errs = append(errs, checkStages("stages", t.Stages)...)
	if len(t.Stages) > 0 && t.Quorum > 1 {
		errs = append(errs, errors.New("quorum: set quorum on each stage, not beside stages"))
	}
	return def, errors.Join(errs...)
}

// compileSchema resolves a declared schema and extracts its required list,
// in the order it is written.
func compileSchema(m map[string]any) ([]string, *jsonschema.Resolved, error) {
	var required []string
	switch r := m["required"].(type) {
	case nil:
	case []any:
		for i, v := range r {
			s, ok := v.(string)
			if !ok {
				return nil, nil, fmt.Errorf("required[%d] is not a string", i)
			}
			required = append(required, s)
		}
	case []string:
		required = append(required, r...)
	default:
		return nil, nil, errors.New("required must be a list of argument names")
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(raw, &sch); err != nil {
		return nil, nil, fmt.Errorf("not a JSON Schema: %v", err)
	}
	res, err := sch.Resolve(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("not a valid JSON Schema: %v", err)
	}
	return required, res, nil
}

// party records an authenticated caller.
func party(c *bot.Caller) approvals.Party {
	if c == nil {
		return approvals.Party{}
	}
	return approvals.Party{ID: c.ID, Name: c.Name, Role: string(c.Role), Kind: c.Kind, Display: c.String(), Surface: c.Surface}
}
