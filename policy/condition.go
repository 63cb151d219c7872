package policy

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// A Condition is a compiled tools[].rules[].when expression: CEL over the
// call's arguments (args, typed from the tool's JSON Schema where it
// declares properties), the tool's name (tool), who asks (requester: name,
// role, kind, scopes, groups), the memory space (space: user_id, agent_id,
// run_id), the current values of named subjects in that space (facts: a
// map from subject to its active values) and the time (now). It is
// compiled and type-checked once, at start, and evaluated with a cost
// limit; it reads nothing but its input.
type Condition struct {
	expr string
	ast  *cel.Ast
	// prg evaluates with the cost limit; explain re-runs a true
	// evaluation with state tracking (the same bounded cost: cel-go
	// v0.31 stops tracking cost when state is tracked too) to say why.
	prg, explainPrg cel.Program
	facts           []string
}

// ConditionInput is what a condition is evaluated on.
type ConditionInput struct {
	Tool      string
	Args      map[string]any // the call's arguments, as decoded from JSON
	Requester ConditionRequester
	Space     Space
	// Facts are the active values of the subjects the condition reads
	// (Condition.Facts), by subject; a subject with none maps to an empty
	// list (a missing one reads as empty too).
	Facts map[string][]string
	Now   time.Time
}

// ConditionRequester is who asks, as a condition reads it.
type ConditionRequester struct {
	Name, Role, Kind string
	Scopes           []string
	// Groups are the approver groups the requester belongs to (sorted);
	// a condition compares them as written (`"night_agents" in
	// requester.groups`).
	Groups []string
}

// Bounds of a condition.
const (
	// MaxConditionBytes is the longest when expression accepted.
	MaxConditionBytes = 4096
	// ConditionCostLimit bounds one evaluation (CEL's cost units: about
	// one per operation, more per element a comprehension visits); an
	// evaluation that would exceed it stops with an error, and the rule
	// fails closed.
	ConditionCostLimit = 100_000
)

// The struct types conditions see.
const (
	argsType      = "countersign.Args"
	requesterType = "countersign.Requester"
	spaceType     = "countersign.Space"
)

// celPosition is how CEL names a place in the expression ("<input>:1:5: ").
var celPosition = regexp.MustCompile(`(?m)^(?:ERROR: )?<input>:(\d+):(\d+): `)

// CompileCondition compiles and type-checks expr for a tool whose
// arguments are described by schema (a JSON Schema object; nil or one
// without properties makes args a map of any values). The error is CEL's
// message, with the line and column in expr.
func CompileCondition(expr string, schema map[string]any) (*Condition, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("empty: write a CEL expression, for example args.dose_mg > 10")
	}
	if len(expr) > MaxConditionBytes {
		return nil, fmt.Errorf("%d bytes; at most %d", len(expr), MaxConditionBytes)
	}
	base, err := cel.NewEnv()
	if err != nil {
		return nil, err
	}
	prov := &structProvider{Provider: base.CELTypeProvider(), fields: map[string]map[string]*types.FieldType{}}
	argsDecl := prov.fromSchema(argsType, schema)
	prov.fromSchema(requesterType, map[string]any{"type": "object", "properties": map[string]any{
		"name": map[string]any{"type": "string"}, "role": map[string]any{"type": "string"}, "kind": map[string]any{"type": "string"},
		"scopes": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"groups": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
	}})
	prov.fromSchema(spaceType, map[string]any{"type": "object", "properties": map[string]any{
		"user_id": map[string]any{"type": "string"}, "agent_id": map[string]any{"type": "string"}, "run_id": map[string]any{"type": "string"},
	}})
	env, err := cel.NewEnv(
		cel.CustomTypeProvider(prov),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(), // substring, split, lowerAscii, …
		cel.Variable("args", argsDecl),
		cel.Variable("tool", cel.StringType),
		cel.Variable("requester", cel.ObjectType(requesterType)),
		cel.Variable("space", cel.ObjectType(spaceType)),
		cel.Variable("facts", cel.MapType(cel.StringType, cel.ListType(cel.StringType))),
		cel.Variable("now", cel.TimestampType),
		cel.ParserExpressionSizeLimit(MaxConditionBytes),
		cel.ParserRecursionLimit(64),
	)
	if err != nil {
		return nil, err
	}
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		msg := strings.TrimPrefix(iss.Err().Error(), "ERROR: ")
		return nil, errors.New(celPosition.ReplaceAllString(msg, "at line $1, column $2: "))
	}
	if !checked.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("is of type %s, not bool: a condition says whether the rule applies (for example args.dose_mg > 10)", checked.OutputType())
	}
	prg, err := env.Program(checked, cel.CostLimit(ConditionCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	explain, err := env.Program(checked, cel.EvalOptions(cel.OptTrackState))
	if err != nil {
		return nil, err
	}
	return &Condition{expr: expr, ast: checked, prg: prg, explainPrg: explain, facts: factsRead(checked.NativeRep())}, nil
}

// String is the expression as written.
func (c *Condition) String() string { return c.expr }

// Facts are the subjects the condition reads (facts.allergy,
// facts["allergy"]), sorted: the caller reads them in the request's space.
func (c *Condition) Facts() []string { return slices.Clone(c.facts) }

// Eval evaluates the condition on in. why says what made it true, from
// the comparisons that held ("dose_mg 50 > 10"); err is a run-time error
// (a missing argument, the cost limit), on which the caller fails closed.
func (c *Condition) Eval(in ConditionInput) (matched bool, why string, err error) {
	defer func() {
		if p := recover(); p != nil { // CEL never should; a rule still fails closed
			matched, why, err = false, "", fmt.Errorf("evaluation failed: %v", p)
		}
	}()
	facts := make(map[string]any, len(in.Facts)+len(c.facts))
	for _, s := range c.facts {
		facts[s] = []string{}
	}
	for s, v := range in.Facts {
		facts[s] = slices.Clone(v)
	}
	args := in.Args
	if args == nil {
		args = map[string]any{}
	}
	now := in.Now
	if now.IsZero() {
		now = time.Unix(0, 0)
	}
	vars := map[string]any{
		"args": args,
		"tool": in.Tool,
		"requester": map[string]any{"name": in.Requester.Name, "role": in.Requester.Role, "kind": in.Requester.Kind,
			"scopes": anyList(in.Requester.Scopes), "groups": anyList(in.Requester.Groups)},
		"space": map[string]any{"user_id": in.Space.UserID, "agent_id": in.Space.AgentID, "run_id": in.Space.RunID},
		"facts": facts,
		"now":   now.UTC(),
	}
	out, _, err := c.prg.Eval(vars)
	if err != nil {
		return false, "", err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, "", fmt.Errorf("evaluated to %v, not a bool", out)
	}
	if !b {
		return false, "", nil
	}
	_, det, _ := c.explainPrg.Eval(vars)
	return true, c.explain(det), nil
}

func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// comparisons are the operators whose operands explain a match.
var comparisons = map[string]string{
	operators.Greater: ">", operators.GreaterEquals: ">=", operators.Less: "<", operators.LessEquals: "<=",
	operators.Equals: "==", operators.NotEquals: "!=", operators.In: "in",
}

// explain renders the comparisons that held in a true evaluation, with
// their operands' values; the expression itself when there are none.
func (c *Condition) explain(det *cel.EvalDetails) string {
	if det == nil || det.State() == nil {
		return c.expr
	}
	st := det.State()
	root := ast.NavigateAST(c.ast.NativeRep())
	var parts []string
	for _, e := range ast.MatchDescendants(root, ast.KindMatcher(ast.CallKind)) {
		call := e.AsCall()
		op, ok := comparisons[call.FunctionName()]
		if !ok || len(call.Args()) != 2 {
			continue
		}
		if v, ok := st.Value(e.ID()); !ok || v != types.True {
			continue
		}
		l, r := call.Args()[0], call.Args()[1]
		parts = append(parts, operand(l, st)+" "+op+" "+operand(r, st))
		if len(parts) == 4 {
			break
		}
	}
	if len(parts) == 0 {
		return c.expr
	}
	return strings.Join(parts, ", ")
}

// operand renders one side of a comparison: a literal as written, anything
// else as its name and value ("dose_mg 50").
func operand(e ast.Expr, st interface {
	Value(int64) (ref.Val, bool)
}) string {
	if e.Kind() == ast.LiteralKind {
		return valueText(e.AsLiteral())
	}
	name := exprName(e)
	v, ok := st.Value(e.ID())
	if !ok {
		return name
	}
	return name + " " + valueText(v)
}

// exprName names an operand: args.dose_mg is dose_mg, facts.allergy is
// facts.allergy, other selects and identifiers as written.
func exprName(e ast.Expr) string {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent()
	case ast.SelectKind:
		s := e.AsSelect()
		if op := s.Operand(); op.Kind() == ast.IdentKind && op.AsIdent() == "args" {
			return s.FieldName()
		}
		return exprName(s.Operand()) + "." + s.FieldName()
	case ast.CallKind:
		call := e.AsCall()
		if call.FunctionName() == operators.Index && len(call.Args()) == 2 {
			return exprName(call.Args()[0]) + "[" + exprName(call.Args()[1]) + "]"
		}
		return call.FunctionName() + "(…)"
	case ast.LiteralKind:
		return valueText(e.AsLiteral())
	}
	return "(…)"
}

// valueText renders a value briefly: strings quoted, numbers shortest,
// lists and maps cut.
func valueText(v ref.Val) string {
	switch x := v.Value().(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int64, uint64, bool:
		return fmt.Sprint(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	}
	s := fmt.Sprint(v)
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// factsRead lists the subjects a checked expression reads from facts.
func factsRead(a *ast.AST) []string {
	seen := map[string]bool{}
	root := ast.NavigateAST(a)
	for _, e := range ast.MatchDescendants(root, ast.AllMatcher()) {
		switch e.Kind() {
		case ast.SelectKind:
			s := e.AsSelect()
			if op := s.Operand(); op.Kind() == ast.IdentKind && op.AsIdent() == "facts" {
				seen[s.FieldName()] = true
			}
		case ast.CallKind:
			call := e.AsCall()
			if call.FunctionName() != operators.Index || len(call.Args()) != 2 {
				continue
			}
			op, key := call.Args()[0], call.Args()[1]
			if op.Kind() == ast.IdentKind && op.AsIdent() == "facts" && key.Kind() == ast.LiteralKind {
				if s, ok := key.AsLiteral().Value().(string); ok {
					seen[s] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// structProvider adds struct types built from JSON Schemas to CEL's type
// provider: a field is read from the Go map the value is, converted to
// the type the schema gives it.
type structProvider struct {
	types.Provider
	fields map[string]map[string]*types.FieldType
}

// fromSchema declares the struct type name from schema's properties and
// returns the type a value of schema has: the struct, or a map of any
// values when schema declares no properties.
func (p *structProvider) fromSchema(name string, schema map[string]any) *types.Type {
	props, _ := schema["properties"].(map[string]any)
	if len(props) == 0 {
		return cel.MapType(cel.StringType, cel.DynType)
	}
	fields := map[string]*types.FieldType{}
	p.fields[name] = fields
	for field, sub := range props {
		sm, _ := sub.(map[string]any)
		t, conv := p.typeOf(name+"."+field, sm)
		fields[field] = &types.FieldType{
			Type: t,
			IsSet: func(target any) bool {
				m, ok := target.(map[string]any)
				if !ok {
					return false
				}
				v, ok := m[field]
				return ok && v != nil
			},
			GetFrom: func(target any) (any, error) {
				m, ok := target.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("no field %s: not an object", field)
				}
				v, ok := m[field]
				if !ok || v == nil {
					return nil, fmt.Errorf("no such key: %s (the call does not give it; test has(%s) first)", field, strings.TrimPrefix(strings.ToLower(name), "countersign.")+"."+field)
				}
				return conv(field, v)
			},
		}
	}
	return cel.ObjectType(name)
}

// typeOf maps a property's schema to a CEL type and a conversion of the
// JSON value to it.
func (p *structProvider) typeOf(name string, schema map[string]any) (*types.Type, func(string, any) (any, error)) {
	keep := func(_ string, v any) (any, error) { return v, nil }
	t, _ := schema["type"].(string)
	switch t {
	case "string":
		return cel.StringType, func(f string, v any) (any, error) {
			if s, ok := v.(string); ok {
				return s, nil
			}
			return nil, fmt.Errorf("%s is not a string", f)
		}
	case "boolean":
		return cel.BoolType, func(f string, v any) (any, error) {
			if b, ok := v.(bool); ok {
				return b, nil
			}
			return nil, fmt.Errorf("%s is not a boolean", f)
		}
	case "integer":
		return cel.IntType, func(f string, v any) (any, error) {
			switch n := v.(type) {
			case float64:
				if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
					return int64(n), nil
				}
			case int64:
				return n, nil
			case int:
				return int64(n), nil
			}
			return nil, fmt.Errorf("%s is not an integer", f)
		}
	case "number":
		return cel.DoubleType, func(f string, v any) (any, error) {
			switch n := v.(type) {
			case float64:
				return n, nil
			case int64:
				return float64(n), nil
			case int:
				return float64(n), nil
			}
			return nil, fmt.Errorf("%s is not a number", f)
		}
	case "array":
		items, _ := schema["items"].(map[string]any)
		et, _ := p.typeOf(name+"[]", items)
		return cel.ListType(et), func(f string, v any) (any, error) {
			if l, ok := v.([]any); ok {
				return l, nil
			}
			return nil, fmt.Errorf("%s is not an array", f)
		}
	case "object":
		return p.fromSchema(name, schema), func(f string, v any) (any, error) {
			if m, ok := v.(map[string]any); ok {
				return m, nil
			}
			return nil, fmt.Errorf("%s is not an object", f)
		}
	}
	return cel.DynType, keep
}

// FindStructType implements types.Provider.
func (p *structProvider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.fields[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Provider.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (p *structProvider) FindStructFieldNames(name string) ([]string, bool) {
	if fs, ok := p.fields[name]; ok {
		out := make([]string, 0, len(fs))
		for f := range fs {
			out = append(out, f)
		}
		sort.Strings(out)
		return out, true
	}
	return p.Provider.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (p *structProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if fs, ok := p.fields[name]; ok {
		f, ok := fs[field]
		return f, ok
	}
	return p.Provider.FindStructFieldType(name, field)
}

// NewValue implements types.Provider: conditions build no struct values.
func (p *structProvider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.fields[name]; ok {
		return types.NewErr("%s values cannot be built in a condition", name)
	}
	return p.Provider.NewValue(name, fields)
}
