package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// decodeConfig decodes YAML data into cfg. Problems a reader can fix (an
// unknown key, a value of the wrong type) are added to p under their key
// path, such as "http.rate_brust", and decoding goes on, so that they are
// reported together with the semantic problems. Only data that is not YAML
// at all is returned as an error.
func decodeConfig(data []byte, cfg *Config, p *problems) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file: every key takes its default
		}
		return fmt.Errorf("not valid YAML: %v", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	w := keyWalker{p: p, lines: map[int]string{}}
	w.walk(root, reflect.TypeOf(cfg).Elem(), "")
	if err := root.Decode(cfg); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return fmt.Errorf("not valid YAML: %v", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		// The walker has named each mismatch by its key; report here only
		// what it could not place.
		for _, e := range te.Errors {
			line := lineOf(e)
			if w.reported[line] {
				continue
			}
			key := w.lines[line]
			if key == "" {
				key = "config"
			}
			p.add(key, "%s", e)
		}
	}
	return nil
}

// keyWalker walks a YAML tree beside the Go type it decodes into, naming
// every unknown key and every value of the wrong shape by its key path.
type keyWalker struct {
	p *problems
	// lines maps a line number to the key path of the value on it.
	lines map[int]string
	// reported marks the lines the walker reported a problem on.
	reported map[int]bool
}

func (w *keyWalker) report(n *yaml.Node, key, format string, args ...any) {
	if w.reported == nil {
		w.reported = map[int]bool{}
	}
	w.reported[n.Line] = true
	w.p.add(key, format+" (line %d)", append(args, n.Line)...)
}

func (w *keyWalker) walk(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if _, ok := w.lines[n.Line]; !ok {
		w.lines[n.Line] = path
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an explicit null leaves the key unset
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.report(n, orRoot(path), "must be a mapping of keys, not %s", shape(n))
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge key: its mapping holds this struct's keys
				w.walk(v, t, path)
				continue
			}
			kp := join(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				hint := ""
				if s := closest(k.Value, fields); s != "" {
					hint = fmt.Sprintf("; did you mean %s?", join(path, s))
				}
				w.report(k, kp, "not a known key%s", hint)
				continue
			}
			w.walk(v, ft, kp)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.report(n, orRoot(path), "must be a list, not %s", shape(n))
			return
		}
		for i, e := range n.Content {
			w.walk(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.report(n, orRoot(path), "must be a mapping, not %s", shape(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			w.walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
		}
	case reflect.Interface:
		// any value is accepted (a tool's JSON Schema)
	default:
		if n.Kind != yaml.ScalarNode {
			w.report(n, orRoot(path), "must be a single value, not %s", shape(n))
			return
		}
		v := reflect.New(t)
		if err := n.Decode(v.Interface()); err != nil {
			w.report(n, path, "%q is not %s", n.Value, typeWord(t))
		}
	}
}

// yamlFields maps a struct's YAML key names to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}

// typeWord names a Go type as a config reader knows it.
func typeWord(t reflect.Type) string {
	if t.PkgPath() == "time" && t.Name() == "Duration" {
		return "a duration (for example 30s, 5m or 1h)"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}

// shape names a node's kind for a message.
func shape(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "config"
	}
	return path
}

var lineRe = regexp.MustCompile(`^line (\d+):`)

// lineOf reads the line number yaml.v3 puts at the start of a type error.
func lineOf(msg string) int {
	m := lineRe.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// closest returns the known key within two edits of key, if exactly one
// is the nearest.
func closest(key string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	for f := range fields {
		if d := editDistance(key, f); d < bestD || (d == bestD && f < best) {
			best, bestD = f, d
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (adjacent swaps count
// one), enough to catch rate_brust for rate_burst.
func editDistance(a, b string) int {
	la, lb := len(a), len(b)
	d := make([][]int, la+1)
	for i := range d {
		d[i] = make([]int, lb+1)
		d[i][0] = i
	}
	for j := 0; j <= lb; j++ {
		d[0][j] = j
	}
	for i := 1; i <= la; i++ {
		for j := 1; j <= lb; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[la][lb]
}
