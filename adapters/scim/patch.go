package scim

import (
	"fmt"
	"strings"

	scimlib "github.com/elimity-com/scim"
	filter "github.com/scim2/filter-parser/v2"
)

// applyOp applies one PATCH operation (RFC 7644 3.5.2), as validated by
// the library against the schema, to attrs. What it supports is what Okta
// and Entra send: no path with an object value (each attribute set), an
// attribute or a sub-attribute path, and a value filter of the form
// attr[sub eq "v"] (optionally .sub after it). Anything else is a 400
// naming the path.
func applyOp(attrs map[string]any, op scimlib.PatchOperation) error {
	kind := strings.ToLower(op.Op)
	if op.Path == nil {
		m, ok := op.Value.(map[string]any)
		if !ok || kind == "remove" {
			return badRequest(fmt.Sprintf("a %s without a path needs an object of attributes as its value", kind))
		}
		for k, v := range m {
			if name, sub, ok := strings.Cut(k, "."); ok && !strings.HasPrefix(k, "urn:") {
				setSub(attrs, name, sub, v)
				continue
			}
			if old, ok := attrs[k].(map[string]any); ok && kind != "replace" {
				if nv, ok := v.(map[string]any); ok {
					for sk, sv := range nv {
						old[sk] = sv
					}
					continue
				}
			}
			attrs[k] = v
		}
		return nil
	}
	p := *op.Path
	target := attrs
	if p.AttributePath.URIPrefix != nil {
		uri := p.AttributePath.URI()
		ext, _ := attrs[uri].(map[string]any)
		if ext == nil {
			ext = map[string]any{}
			attrs[uri] = ext
		}
		target = ext
	}
	name := p.AttributePath.AttributeName
	sub := ""
	if p.AttributePath.SubAttribute != nil {
		sub = *p.AttributePath.SubAttribute
	}
	if p.SubAttribute != nil {
		sub = *p.SubAttribute
	}
	if p.ValueExpression != nil {
		return applyFiltered(target, name, sub, p.ValueExpression, kind, op.Value, p.String())
	}
	switch kind {
	case "remove":
		if sub != "" {
			if m, ok := target[name].(map[string]any); ok {
				delete(m, sub)
			}
			return nil
		}
		if list, ok := target[name].([]any); ok && op.Value != nil {
			// Entra removes members by value: {"path":"members","value":[{"value":"id"}]}.
			target[name] = without(list, valuesOf(op.Value))
			return nil
		}
		delete(target, name)
	case "add":
		if sub != "" {
			setSub(target, name, sub, op.Value)
			return nil
		}
		if list, ok := target[name].([]any); ok {
			if add, ok := op.Value.([]any); ok {
				target[name] = union(list, add)
				return nil
			}
		}
		target[name] = op.Value
	case "replace":
		if sub != "" {
			setSub(target, name, sub, op.Value)
			return nil
		}
		target[name] = op.Value
	default:
		return badRequest(fmt.Sprintf("unknown PATCH op %q; use add, remove or replace", op.Op))
	}
	return nil
}

// applyFiltered applies an operation to the elements of multi-valued
// attribute name that expression matches.
func applyFiltered(target map[string]any, name, sub string, exp filter.Expression, kind string, value any, path string) error {
	ae, ok := exp.(*filter.AttributeExpression)
	if !ok || ae.Operator != filter.EQ {
		return badRequest(fmt.Sprintf("the path %s uses a filter Countersign does not apply; use attr[sub eq \"value\"]", path))
	}
	field := ae.AttributePath.AttributeName
	if ae.AttributePath.SubAttribute != nil {
		field = *ae.AttributePath.SubAttribute
	}
	want := fmt.Sprint(ae.CompareValue)
	list, _ := target[name].([]any)
	matches := func(e any) bool {
		m, ok := e.(map[string]any)
		return ok && strings.EqualFold(fmt.Sprint(m[field]), want)
	}
	var out []any
	found := false
	for _, e := range list {
		if !matches(e) {
			out = append(out, e)
			continue
		}
		found = true
		m := e.(map[string]any)
		switch {
		case kind == "remove" && sub == "":
			continue // the element goes
		case kind == "remove":
			delete(m, sub)
		case sub != "":
			m[sub] = value
		default:
			if nv, ok := value.(map[string]any); ok {
				for k, v := range nv {
					m[k] = v
				}
			}
		}
		out = append(out, m)
	}
	if !found && kind != "remove" {
		m := map[string]any{field: ae.CompareValue}
		if sub != "" {
			m[sub] = value
		} else if nv, ok := value.(map[string]any); ok {
			for k, v := range nv {
				m[k] = v
			}
		}
		out = append(out, m)
	}
	if out == nil {
		out = []any{}
	}
	target[name] = out
	return nil
}

// setSub sets sub-attribute sub of complex attribute name.
func setSub(target map[string]any, name, sub string, v any) {
	m, ok := target[name].(map[string]any)
	if !ok {
		m = map[string]any{}
		target[name] = m
	}
	m[sub] = v
}

// valuesOf are the "value"s of a list of {value: …} objects.
func valuesOf(v any) map[string]bool {
	out := map[string]bool{}
	list, _ := v.([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out[fmt.Sprint(m["value"])] = true
		}
	}
	return out
}

// without is list less the elements whose value is in drop.
func without(list []any, drop map[string]bool) []any {
	out := []any{}
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && drop[fmt.Sprint(m["value"])] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// union is list with the elements of add whose value it lacks.
func union(list, add []any) []any {
	have := valuesOf(list)
	out := append([]any{}, list...)
	for _, e := range add {
		m, ok := e.(map[string]any)
		if ok && have[fmt.Sprint(m["value"])] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// applyOps applies a PATCH request's operations in order to attrs, and
// returns the attributes as stored (cleanAttrs).
func applyOps(attrs map[string]any, ops []scimlib.PatchOperation) (map[string]any, error) {
	for _, op := range ops {
		if err := applyOp(attrs, op); err != nil {
			return attrs, err
		}
	}
	return cleanAttrs(attrs), nil
}

// pageOf is the page params asks for of all (StartIndex is 1-based).
func pageOf[R interface{ resource() scimlib.Resource }](all []R, params scimlib.ListRequestParams) scimlib.Page {
	page := scimlib.Page{TotalResults: len(all), Resources: []scimlib.Resource{}}
	for i := max(params.StartIndex, 1) - 1; i < len(all) && len(page.Resources) < params.Count; i++ {
		page.Resources = append(page.Resources, all[i].resource())
	}
	return page
}
