package memorytools

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/memory"
)

// Input limits.
const (
	maxSubject  = 200  // bytes
	maxValue    = 4000 // bytes
	maxText     = 4000 // bytes
	maxSource   = 200  // bytes
	maxScope    = 64   // bytes
	maxNote     = 200  // bytes: decided_by
	maxReason   = 1000 // bytes
	maxMetadata = 4000 // bytes of JSON
	maxMetaKeys = 32
	maxRanks    = 100
)

// checkSubject validates a required subject.
func checkSubject(v string) error {
	if err := bot.CheckText("subject", v, maxSubject, false); err != nil {
		return err
	}
	if err := checkVisible("subject", v); err != nil {
		return err
	}
	if memory.Fold(v) == "" {
		return bot.Invalid("subject", "required: name what the fact is about, for example active_medication (letters or digits)")
	}
	return nil
}

// checkVisible refuses an identifier holding an invisible formatting
// character (zero-width, bidirectional control): it would look like
// another, for example a declared slot, while being stored apart.
func checkVisible(field, v string) error {
	if r, ok := memory.FirstInvisible(v); ok {
		return bot.Invalid(field, "must not contain invisible characters (found U+%04X, a zero-width or bidirectional control); retype it without them", r)
	}
	return nil
}

func checkScope(v string) error {
	if v == "" {
		return nil
	}
	if err := bot.CheckText("scope", v, maxScope, false); err != nil {
		return err
	}
	if err := checkVisible("scope", v); err != nil {
		return err
	}
	if memory.Fold(v) == "" {
		return bot.Invalid("scope", "must contain a letter or digit (for example global, web, backend), or be left out for global")
	}
	return nil
}

// rememberArgs are remember's arguments: one structured fact.
type rememberArgs struct {
	bot.Space
	Subject    string         `json:"subject" jsonschema:"what the fact is about (a declared slot name or alias, or any snake_case subject), e.g. active_medication"`
	Value      string         `json:"value" jsonschema:"the value, e.g. 'warfarin 5mg daily'; kept byte for byte on a verbatim slot"`
	Text       string         `json:"text,omitempty" jsonschema:"what was said, kept as the fact's source sentence"`
	Confidence *float64       `json:"confidence,omitempty" jsonschema:"0 to 1 (default 0.95); a change below 0.7 is flagged, not applied"`
	Source     string         `json:"source,omitempty" jsonschema:"who asserted it (provenance; drives the reconcile policy; a trusted source skips the confirm gate)"`
	Kind       string         `json:"kind,omitempty" jsonschema:"state (default: holds until replaced) or event (something that happened; never superseded)"`
	Scope      string         `json:"scope,omitempty" jsonschema:"the slot's scope (default global); a value in another scope coexists"`
	TimeRef    string         `json:"time_ref,omitempty" jsonschema:"current (default), past (archived, never current) or future (held, not applied)"`
	Metadata   map[string]any `json:"metadata,omitempty" jsonschema:"extra fields kept with the fact; category feeds the critical channel"`
	Replaces   string         `json:"replaces,omitempty" jsonschema:"the current value (or list item, e.g. warfarin) this value replaces; matched like forget's value"`
}

// Validate checks lengths, ranges and enumerations.
func (a *rememberArgs) Validate() error {
	if err := checkSubject(a.Subject); err != nil {
		return err
	}
	if strings.TrimSpace(a.Value) == "" {
		return bot.Invalid("value", "required: the fact's value must not be empty (to remove a value, use forget)")
	}
	if err := bot.CheckText("value", a.Value, maxValue, true); err != nil {
		return err
	}
	if err := bot.CheckText("text", a.Text, maxText, true); err != nil {
		return err
	}
	if a.Confidence != nil && (math.IsNaN(*a.Confidence) || *a.Confidence < 0 || *a.Confidence > 1) {
		return bot.Invalid("confidence", "must be between 0 and 1 (got %v)", *a.Confidence)
	}
	if err := bot.CheckText("source", a.Source, maxSource, false); err != nil {
		return err
	}
	if err := checkVisible("source", a.Source); err != nil {
		return err
	}
	switch a.Kind {
	case "", "state", "event":
	default:
		return bot.Invalid("kind", "%q is not a kind; use state or event", a.Kind)
	}
	if err := checkScope(a.Scope); err != nil {
		return err
	}
	switch a.TimeRef {
	case "", "current", "past", "future", "unknown":
	default:
		return bot.Invalid("time_ref", "%q is not a time reference; use current, past or future", a.TimeRef)
	}
	if err := bot.CheckText("replaces", a.Replaces, maxValue, true); err != nil {
		return err
	}
	if a.Replaces != "" && strings.TrimSpace(a.Replaces) == "" {
		return bot.Invalid("replaces", "must name the current value this one replaces, or be left out")
	}
	_, _, err := metadataOf(a.Metadata)
	return err
}

// metadataOf validates the metadata object and returns it encoded, with its
// category.
func metadataOf(m map[string]any) (json.RawMessage, string, error) {
	if len(m) == 0 {
		return nil, "", nil
	}
	if len(m) > maxMetaKeys {
		return nil, "", bot.Invalid("metadata", "must have at most %d keys (got %d)", maxMetaKeys, len(m))
	}
	for k := range m {
		if k == "" || len(k) > 100 || bot.CheckText("", k, len(k), false) != nil {
			return nil, "", bot.Invalid("metadata", "keys must be 1 to 100 bytes without control characters")
		}
	}
	var cat string
	if v, ok := m["category"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, "", bot.Invalid("metadata", "category must be a string, e.g. \"allergy\"")
		}
		if err := bot.CheckText("metadata", s, maxSubject, false); err != nil {
			return nil, "", err
		}
		cat = strings.TrimSpace(s)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, "", bot.Invalid("metadata", "cannot be encoded: %v", err)
	}
	if len(b) > maxMetadata {
		return nil, "", bot.Invalid("metadata", "must be at most %d bytes of JSON (got %d)", maxMetadata, len(b))
	}
	return b, cat, nil
}

// forgetArgs are forget's arguments.
type forgetArgs struct {
	bot.Space
	Subject string `json:"subject" jsonschema:"the subject whose current value is removed"`
	Value   string `json:"value,omitempty" jsonschema:"which item of a list slot to remove (e.g. metformin); required when several are current"`
	Text    string `json:"text,omitempty" jsonschema:"what was said, kept with the retraction"`
	Scope   string `json:"scope,omitempty" jsonschema:"the slot's scope (default global)"`
	Source  string `json:"source,omitempty" jsonschema:"who asked for the removal; a trusted source skips the confirm gate"`
}

// Validate checks lengths.
func (a *forgetArgs) Validate() error {
	if err := checkSubject(a.Subject); err != nil {
		return err
	}
	if err := bot.CheckText("value", a.Value, maxValue, true); err != nil {
		return err
	}
	if err := bot.CheckText("text", a.Text, maxText, true); err != nil {
		return err
	}
	if err := bot.CheckText("source", a.Source, maxSource, false); err != nil {
		return err
	}
	if err := checkVisible("source", a.Source); err != nil {
		return err
	}
	return checkScope(a.Scope)
}

// idArgs take one fact id.
type idArgs struct {
	bot.Space
	MemoryID uint64 `json:"memory_id" jsonschema:"the fact's id (#n), sequential per memory space"`
}

// Validate checks the id.
func (a *idArgs) Validate() error { return checkID(a.MemoryID) }

func checkID(id uint64) error {
	if id == 0 {
		return bot.Invalid("memory_id", "must be a positive id such as 2")
	}
	return nil
}

// updateArgs are update_memory's arguments.
type updateArgs struct {
	bot.Space
	MemoryID uint64 `json:"memory_id" jsonschema:"the current fact to edit"`
	NewValue string `json:"new_value" jsonschema:"its corrected value"`
}

// Validate checks the id and value.
func (a *updateArgs) Validate() error {
	if err := checkID(a.MemoryID); err != nil {
		return err
	}
	if strings.TrimSpace(a.NewValue) == "" {
		return bot.Invalid("new_value", "required: the corrected value must not be empty (to remove a value, use forget)")
	}
	return bot.CheckText("new_value", a.NewValue, maxValue, true)
}

// historyArgs are history's arguments: a subject, paged.
type historyArgs struct {
	bot.Space
	Subject string `json:"subject" jsonschema:"the subject"`
	pageArgs
}

// Validate checks the subject and the page.
func (a *historyArgs) Validate() error {
	if err := checkSubject(a.Subject); err != nil {
		return err
	}
	return a.pageArgs.validate()
}

// spaceArgs take only the memory space.
type spaceArgs struct {
	bot.Space
}

// pagedSpaceArgs take the memory space and a page (list_memories,
// pending_changes).
type pagedSpaceArgs struct {
	bot.Space
	pageArgs
}

// Validate checks the page.
func (a *pagedSpaceArgs) Validate() error { return a.pageArgs.validate() }

// recallArgs are recall's arguments.
type recallArgs struct {
	bot.Space
	Question           string  `json:"question" jsonschema:"what to recall; facts are ranked lexically over subject, value and what was said"`
	CriticalCategories *string `json:"critical_categories,omitempty" jsonschema:"comma-separated categories always included for this call, replacing the configured memory.critical_categories (seed 000's per-call override); an explicit empty string means none for this call; leave it out for the configured set"`
	Limit              *int    `json:"limit,omitempty" jsonschema:"at most this many ranked facts (default and maximum: the configured memory.recall_context); critical facts are always included, up to memory.critical_budget"`
}

// Validate checks lengths.
func (a *recallArgs) Validate() error {
	if a.Limit != nil && *a.Limit < 1 {
		return bot.Invalid("limit", "must be at least 1 (the default and maximum is the configured memory.recall_context)")
	}
	if strings.TrimSpace(a.Question) == "" {
		return bot.Invalid("question", "required: ask a question, e.g. \"what is she taking?\"")
	}
	if err := bot.CheckText("question", a.Question, maxText, true); err != nil {
		return err
	}
	if a.CriticalCategories == nil {
		return nil
	}
	return bot.CheckText("critical_categories", *a.CriticalCategories, maxText, false)
}

// safetyArgs are the safety policy, shared by check_before_act and
// safe_recall. Unset fields take the documented defaults.
type safetyArgs struct {
	MinConfidence           *float64 `json:"min_confidence,omitempty" jsonschema:"a fact below this confidence blocks (default 0.7)"`
	RequireActive           *bool    `json:"require_active,omitempty" jsonschema:"a retired fact blocks (default true)"`
	BlockOnFlagged          *bool    `json:"block_on_flagged,omitempty" jsonschema:"a flagged fact (conflict or pending approval) blocks (default true)"`
	MaxStalenessDays        *float64 `json:"max_staleness_days,omitempty" jsonschema:"a fact last set more than this many days ago blocks (default 0: off)"`
	BlockOnRecentChangeDays *float64 `json:"block_on_recent_change_days,omitempty" jsonschema:"a fact that superseded another less than this many days ago blocks (default 0: off)"`
}

func (s safetyArgs) validate() error {
	for _, f := range []struct {
		name string
		v    *float64
	}{{"min_confidence", s.MinConfidence}, {"max_staleness_days", s.MaxStalenessDays}, {"block_on_recent_change_days", s.BlockOnRecentChangeDays}} {
		if f.v != nil && (math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			return bot.Invalid(f.name, "must be a finite number")
		}
	}
	if s.MinConfidence != nil && (*s.MinConfidence < 0 || *s.MinConfidence > 1) {
		return bot.Invalid("min_confidence", "must be between 0 and 1 (got %v)", *s.MinConfidence)
	}
	return nil
}

// checkArgs are check_before_act's arguments.
type checkArgs struct {
	bot.Space
	Subject string `json:"subject" jsonschema:"the subject the agent is about to act on"`
	safetyArgs
}

// Validate checks the subject and policy.
func (a *checkArgs) Validate() error {
	if err := checkSubject(a.Subject); err != nil {
		return err
	}
	return a.safetyArgs.validate()
}

// safeRecallArgs are safe_recall's arguments.
type safeRecallArgs struct {
	bot.Space
	Question           string  `json:"question" jsonschema:"what to recall before acting on the answer"`
	CriticalCategories *string `json:"critical_categories,omitempty" jsonschema:"comma-separated categories always included for this call, replacing the configured memory.critical_categories (seed 000's per-call override); an explicit empty string means none for this call; leave it out for the configured set"`
	safetyArgs
}

// Validate checks lengths and policy.
func (a *safeRecallArgs) Validate() error {
	r := recallArgs{Question: a.Question, CriticalCategories: a.CriticalCategories}
	if err := r.Validate(); err != nil {
		return err
	}
	return a.safetyArgs.validate()
}

// decideArgs are confirm_change's and reject_change's arguments.
type decideArgs struct {
	bot.Space
	MemoryID  uint64    `json:"memory_id" jsonschema:"the proposal's id, as pending_changes lists it"`
	DecidedBy string    `json:"decided_by,omitempty" jsonschema:"an optional note; the approver recorded is always the authenticated caller"`
	Reason    string    `json:"reason,omitempty" jsonschema:"an optional reason, kept with the decision"`
	Seen      *seenArgs `json:"seen,omitempty" jsonschema:"optional: what you were shown when you decided (the SHA-256 of the card's or page's text, the surface, whether it was cut to fit), recorded with the decision in the audit log"`
}

// seenArgs is what a decider was shown (bot.Seen), as confirm_change's
// and reject_change's seen argument; approve_action's has the same shape.
type seenArgs struct {
	SHA256    string `json:"sha256" jsonschema:"the hex SHA-256 of the text of the card or page as rendered"`
	Surface   string `json:"surface" jsonschema:"where it was shown: slack, discord, web..."`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"true when the card was cut to fit the surface"`
}

// validate checks a seen argument's shape.
func (s *seenArgs) validate() error {
	if s == nil {
		return nil
	}
	if len(s.SHA256) != 64 || strings.Trim(s.SHA256, "0123456789abcdef") != "" {
		return bot.Invalid("seen.sha256", "must be the 64 lower-case hex digits of a SHA-256")
	}
	if s.Surface == "" || len(s.Surface) > 32 || strings.Trim(s.Surface, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return bot.Invalid("seen.surface", "must name the surface in lower-case letters, digits, _ or - (at most 32), such as slack")
	}
	return nil
}

// note is the audit suffix of what the decider was shown, "" for nothing.
func (s *seenArgs) note() string {
	if s == nil {
		return ""
	}
	return " seen: " + (&bot.Seen{SHA256: s.SHA256, Surface: s.Surface, Truncated: s.Truncated}).String() + " " + s.SHA256
}

// Validate checks the id and notes.
func (a *decideArgs) Validate() error {
	if err := checkID(a.MemoryID); err != nil {
		return err
	}
	if err := a.Seen.validate(); err != nil {
		return err
	}
	if err := bot.CheckText("decided_by", a.DecidedBy, maxNote, false); err != nil {
		return err
	}
	return bot.CheckText("reason", a.Reason, maxReason, true)
}

// confirmArgs are confirm_change's arguments: decideArgs and an optional
// edit of the value.
type confirmArgs struct {
	bot.Space
	MemoryID  uint64    `json:"memory_id" jsonschema:"the proposal's id, as pending_changes lists it"`
	DecidedBy string    `json:"decided_by,omitempty" jsonschema:"an optional note; the approver recorded is always the authenticated caller"`
	Reason    string    `json:"reason,omitempty" jsonschema:"an optional reason, kept with the decision"`
	Value     *string   `json:"value,omitempty" jsonschema:"to approve with changes: the value to confirm instead of the one proposed (apixaban 2.5 mg, not 5 mg). It is checked like any value of the slot; the proposed and approved values are both kept, with their SHA-256"`
	Seen      *seenArgs `json:"seen,omitempty" jsonschema:"optional: what you were shown when you decided (the SHA-256 of the card's or page's text, the surface, whether it was cut to fit), recorded with the decision in the audit log"`
}

// Validate checks the id, the notes and the edited value.
func (a *confirmArgs) Validate() error {
	d := decideArgs{MemoryID: a.MemoryID, DecidedBy: a.DecidedBy, Reason: a.Reason, Seen: a.Seen}
	if err := d.Validate(); err != nil {
		return err
	}
	if a.Value == nil {
		return nil
	}
	if strings.TrimSpace(*a.Value) == "" {
		return bot.Invalid("value", "is empty: give the value to confirm, or leave value out to confirm the proposal as it is")
	}
	if err := bot.CheckText("value", *a.Value, maxValue, true); err != nil {
		return err
	}
	// An edit is typed by a person and shown to others (the card, the
	// console, check_before_act): a bidirectional control or zero-width
	// character in it would make it read as another value.
	return checkVisible("value", *a.Value)
}

// setPolicyArgs are set_reconcile_policy's arguments.
type setPolicyArgs struct {
	bot.Space
	Mode      string         `json:"mode,omitempty" jsonschema:"RECENCY (default: newer assertion wins), AUTHORITY (a strictly higher-ranked source wins) or REVIEW (every cross-source conflict is flagged)"`
	Authority map[string]int `json:"authority,omitempty" jsonschema:"source ranks for AUTHORITY, e.g. {\"fhir\": 10, \"agent\": 1}; higher wins; unlisted sources rank 0"`
}

// Validate checks the ranks (the mode is checked by the handler, which
// answers with the seed's wording).
func (a *setPolicyArgs) Validate() error {
	if len(a.Authority) > maxRanks {
		return bot.Invalid("authority", "must have at most %d sources (got %d)", maxRanks, len(a.Authority))
	}
	seen := map[string]string{}
	for src := range a.Authority {
		if strings.TrimSpace(src) == "" || len(src) > maxSource || bot.CheckText("", src, len(src), false) != nil {
			return bot.Invalid("authority", "source names must be 1 to %d bytes without control characters", maxSource)
		}
		k := strings.ToLower(src)
		if other, dup := seen[k]; dup {
			return bot.Invalid("authority", "%q and %q are the same source (sources are case-insensitive); list it once", other, src)
		}
		seen[k] = src
	}
	return nil
}
