package bot

import (
	"context"
	"fmt"
	"reflect"
	"sort"

	"github.com/countersign/countersign/policy"
	"github.com/google/jsonschema-go/jsonschema"
)

// Annotations describe a tool's effects to clients (MCP tool annotations).
type Annotations struct {
	ReadOnly    bool `json:"read_only"`
	Destructive bool `json:"destructive"`
	Idempotent  bool `json:"idempotent"`
}

// Result is what a tool answers: Text for people (the seeds' wording where
// the seeds give it) and Data, the same result as structured fields.
type Result struct {
	Text string `json:"text"`
	Data any    `json:"data"`
	// Grants are the standing grants the result is about, typed for the
	// surfaces inside the process (a Revoke button's number, the sentence
	// of a grant an approval made): list_grants' list, approve_action's
	// grant made. Never encoded: Data holds them for the API.
	Grants []GrantView `json:"-"`
}

// GrantView is a standing grant as a surface names it.
type GrantView struct {
	ID uint64
	// Says is what it allows, one sentence: "grant #2: once calls of
	// restart_service by ops_agent in default (the exact arguments) are
	// approved at once until …. Revoke it with revoke_grant {…}."
	Says string
}

// Handler runs a tool. args is a pointer to the tool's argument struct,
// already decoded, validated and scope-checked.
type Handler func(ctx context.Context, c *Call, args any) (Result, error)

// Tool is one capability of Countersign, served identically on every surface
// (HTTP, MCP, CLI, chat).
type Tool struct {
	Name        string
	Description string
	Capability  policy.Capability
	Annotations Annotations
	// Args is the zero value of the argument struct (for example FooArgs{}).
	// An argument struct that embeds Space takes the memory-space arguments
	// and is scope-checked before the handler runs.
	Args    any
	Handler Handler
	// ArgLimits bound named arguments by the bytes of their JSON, checked
	// before they are decoded: a larger one is refused (413) naming the
	// argument, the limit and the setting that changes it.
	ArgLimits map[string]ArgLimit

	argType  reflect.Type
	schema   *jsonschema.Schema
	required []string
	spaced   bool
	spaceAt  int      // index of the embedded Space field, when spaced
	args     *argSpec // the strict decoding's view of argType
}

// ToolInfo is the public description of a tool.
type ToolInfo struct {
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Capability  policy.Capability  `json:"capability"`
	Annotations Annotations        `json:"annotations"`
	Schema      *jsonschema.Schema `json:"input_schema"`
}

// Space is the memory space (policy.Space, the one space type of every
// floor), under the name surfaces use: every space tool takes it as
// arguments, and memory and approvals store under the same type, so a
// tool hands c.Space to either without a conversion. An alias, named here
// because adapters may not import policy and still build items' spaces.
type Space = policy.Space

var spaceType = reflect.TypeOf(Space{})

// Register adds tools to the registry. It returns an error for a duplicate
// name or an argument type whose schema cannot be inferred.
func (b *Bot) Register(tools ...Tool) error {
	for _, t := range tools {
		if _, dup := b.tools[t.Name]; dup {
			return fmt.Errorf("tool %s registered twice", t.Name)
		}
		t.argType = reflect.TypeOf(t.Args)
		if t.argType == nil || t.argType.Kind() != reflect.Struct {
			return fmt.Errorf("tool %s: Args must be a struct value", t.Name)
		}
		s, req, err := schemaFor(t.argType)
		if err != nil {
			return fmt.Errorf("tool %s: schema: %w", t.Name, err)
		}
		s.Description = t.Description
		t.schema, t.required = s, req
		t.args = newArgSpec(t.argType, req)
		for name, l := range t.ArgLimits {
			if _, ok := t.args.known[name]; !ok || l.Bytes < 1 {
				return fmt.Errorf("tool %s: ArgLimits names %q, which is not an argument or has no positive limit", t.Name, name)
			}
		}
		t.args.limits = t.ArgLimits
		for i := 0; i < t.argType.NumField(); i++ {
			f := t.argType.Field(i)
			if f.Anonymous && f.Type == spaceType && !t.spaced {
				t.spaced, t.spaceAt = true, i
			}
		}
		tt := t
		b.tools[t.Name] = &tt
	}
	return nil
}

// Tools lists the registered tools sorted by name.
func (b *Bot) Tools() []ToolInfo {
	out := make([]ToolInfo, 0, len(b.tools))
	for _, t := range b.tools {
		out = append(out, ToolInfo{Name: t.Name, Description: t.Description, Capability: t.Capability, Annotations: t.Annotations, Schema: t.schema})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Writes reports whether the tool called name may change state: its
// capability is not read or verify, and it is not annotated read-only (as
// list_principals, an admin tool that changes nothing). An unknown tool
// writes nothing: a call of it is refused as not found. The HTTP API's
// Idempotency-Key applies to the tools that write.
func (b *Bot) Writes(name string) bool {
	t, ok := b.tools[name]
	return ok && t.Capability != policy.CapRead && t.Capability != policy.CapVerify && !t.Annotations.ReadOnly
}

// spaceIn normalises the space embedded in args, a pointer to a struct
// whose field i is the embedded Space, and returns it.
func spaceIn(args any, i int) Space {
	sp := reflect.ValueOf(args).Elem().Field(i).Addr().Interface().(*Space)
	*sp = sp.Normalized()
	return *sp
}

// spaceOf returns the (normalised) space embedded in args, if any.
func spaceOf(args any) (Space, bool) {
	v := reflect.ValueOf(args)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return Space{}, false
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Anonymous && f.Type == spaceType {
			sp := v.Field(i).Interface().(Space).Normalized()
			v.Field(i).Set(reflect.ValueOf(sp))
			return sp, true
		}
	}
	return Space{}, false
}
