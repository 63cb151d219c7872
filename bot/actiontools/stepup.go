package actiontools

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// DefaultStepUpWithin is how fresh a sign-in step-up asks for when
// StepUpSpec.Within is zero.
const DefaultStepUpWithin = 5 * time.Minute

// StepUpSpec names the action requests whose approval needs step-up: a
// fresh sign-in at the identity provider (the web console's OIDC) within
// Within. A request requires it when its tool is in Tools or its
// configured category (an exec command's own) is in Categories. Empty
// lists: step-up is off.
type StepUpSpec struct {
	Within     time.Duration
	Tools      []string
	Categories []string
}

// stepUpRule is a compiled StepUpSpec.
type stepUpRule struct {
	within     time.Duration
	tools      map[string]bool
	categories map[policy.Category]bool
}

// compileStepUp checks spec against the declared tools.
func compileStepUp(spec StepUpSpec, tools map[string]*toolDef) (stepUpRule, error) {
	r := stepUpRule{within: spec.Within, tools: map[string]bool{}, categories: map[policy.Category]bool{}}
	if r.within == 0 {
		r.within = DefaultStepUpWithin
	}
	var errs []error
	if r.within < 0 {
		errs = append(errs, errors.New("step_up.within: must be positive"))
	}
	for i, name := range spec.Tools {
		def, ok := tools[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("step_up.tools[%d]: %q is not a declared tool; name one under tools[].name", i, name))
		case def.category == policy.CategoryReadOnly && len(def.commands) == 0:
			errs = append(errs, fmt.Errorf("step_up.tools[%d]: %q is read-only, approved automatically, so step-up would never apply", i, name))
		}
		r.tools[name] = true
	}
	for i, c := range spec.Categories {
		cat, err := policy.ParseCategory(c)
		switch {
		case err != nil || strings.TrimSpace(c) == "":
			errs = append(errs, fmt.Errorf("step_up.categories[%d]: %q is not a category; use mutating, destructive or unclassified", i, c))
		case cat == policy.CategoryReadOnly:
			errs = append(errs, fmt.Errorf("step_up.categories[%d]: read-only calls are approved automatically, so step-up would never apply; use mutating, destructive or unclassified", i))
		}
		r.categories[cat] = true
	}
	return r, errors.Join(errs...)
}

// requires is the step-up a new request for tool in category needs: the
// window, or 0.
func (r stepUpRule) requires(tool string, cat policy.Category) time.Duration {
	if r.tools[tool] || r.categories[cat] {
		return r.within
	}
	return 0
}

// canDecide returns nil when the caller may decide r, else the refusal:
// the one decision rule (policy.Decide). Approving a request that
// requires step-up needs the caller's fresh sign-in at c.Now; refusing it
// never does.
func canDecide(c *bot.Call, r *approvals.Request, approve bool) *policy.Refusal {
	it := r.Decidable()
	it.At = c.Now
	if !approve {
		it.StepUp, it.MinAssurance, it.EarlierStages, it.Counted = 0, "", nil, nil
	}
	return c.Caller.MayDecide(it)
}

// stepUpNote is what an approval's audit entry adds about step-up: how
// and when the approver signed in, when the approval required it
// (stepUp: the request's, or its open stage's).
func stepUpNote(c *bot.Call, stepUp time.Duration, approve bool) string {
	if stepUp <= 0 || !approve {
		return ""
	}
	if n := c.Caller.StepUpNote(); n != "" {
		return " " + n
	}
	return ""
}

// stepUpField is the line a step-up item shows on its card and page; min
// is the tool's least assurance (a passkey asks for one).
func stepUpField(within time.Duration, min policy.Assurance) string {
	if min == policy.AssurancePasskey {
		return fmt.Sprintf("approving needs a step-up with a passkey (within %s), in the web console; a sign-in at the identity provider is not enough, and refusing needs neither", within)
	}
	return fmt.Sprintf("approving needs a fresh sign-in at the identity provider (within %s), in the web console; refusing does not", within)
}
