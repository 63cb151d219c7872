package config

import (
	"fmt"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/memory"
)

// ActionOptions are the action tools' options from approvals:, tools:,
// callbacks:, retention:, limits:, step_up:, break_glass:, soft_approval:
// and the gateway's upstreams. The callback signing secret is the
// caller's to read (callbacks.secret_env), since an empty one is a
// warning, not an error.
func (c *Config) ActionOptions() actiontools.Options {
	o := actiontools.Options{
		ReadOnlyPrefixes:  c.ToolPolicy.ReadOnlyPrefixes,
		DefaultTimeout:    c.Approvals.DefaultTimeout,
		RemindAfter:       c.Approvals.RemindAfter,
		ReminderChannel:   c.Approvals.ReminderChannel,
		EscalateAfter:     c.Approvals.EscalateAfter,
		EscalationChannel: c.Approvals.EscalationChannel,
		EscalationRole:    c.Approvals.EscalationRole,
		EscalationOnCall:  c.Approvals.EscalationOnCall,
		CallbackSecretEnv: c.Callbacks.SecretEnv,
		CallbackHosts:     c.Callbacks.AllowedHosts,
		Retention:         c.Retention.Requests(),
		MaxArgumentsBytes: c.Limits.MaxArgumentsBytes,
		MaxDryRunBytes:    c.Limits.MaxDryRunBytes,
		StepUp:            c.StepUp.Spec(),
		BreakGlass:        c.BreakGlass.Spec(),
	}
	// Context subjects resolve as the memory resolves a subject (a
	// declared slot's name for an alias, else the folded subject).
	schema := c.Schema()
	o.Subject = func(s string) string { return (&memory.Options{Schema: schema}).Resolve(s).Subject }
	o.DefaultApprovalMode, o.SpaceApprovalModes = c.SoftApproval.Modes()
	for _, t := range c.Tools {
		o.Tools = append(o.Tools, t.Spec())
	}
	if len(c.Gateway.Upstreams) > 0 {
		o.Lookup = c.Gateway.Lookup() // gateway.go
	}
	return o
}

// Token is the bearer token the identity provider sends, read from the
// variable scim.token_env names: at least 32 characters.
func (s SCIMConfig) Token(getenv func(string) string) (bot.Secret, error) {
	token := getenv(s.TokenEnv)
	if token == "" {
		return "", fmt.Errorf("scim.token_env: the environment variable %s is not set; set it to a long random token, and give the same token to the identity provider's provisioning app", s.TokenEnv)
	}
	if len(token) < 32 {
		return "", fmt.Errorf("scim.token_env: the token in %s is %d characters; use at least 32 random characters (openssl rand -hex 32)", s.TokenEnv, len(token))
	}
	return bot.Secret(token), nil
}
