package config

import (
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// fieldByKey finds the value of a key path ("http.rate_burst") in v, a
// struct, by its YAML names; ok is false for a path through a list or a
// map, or one that is not there.
func fieldByKey(v reflect.Value, key string) (reflect.Value, bool) {
	for _, name := range strings.Split(key, ".") {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return v, false
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return v, false
		}
		found := false
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if f.IsExported() && tag == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return v, false
		}
	}
	return v, true
}

// TestConfigurationReferenceDefaults: where docs/configuration.md gives a
// key's default as a plain value (`30s`, `600`, `text`) and decoding
// applies one, a config file that leaves the key out runs with that value,
// so the reference never promises a default the code does not apply.
func TestConfigurationReferenceDefaults(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte("{}\n"), t.TempDir())
	if err != nil {
		t.Fatalf("an empty config does not load: %v", err)
	}
	plain := regexp.MustCompile("^`([^`]+)`$")
	checked := 0
	for n, line := range strings.Split(string(doc), "\n") {
		cols := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cols) < 4 {
			continue
		}
		m := plain.FindStringSubmatch(strings.TrimSpace(cols[2]))
		if m == nil {
			continue // none, —, or a default in words
		}
		for _, k := range strings.Split(strings.TrimSpace(cols[1]), ",") {
			k = strings.Trim(strings.TrimSpace(k), "`")
			got, ok := fieldByKey(reflect.ValueOf(*cfg), k)
			if !ok || strings.Contains(k, "[]") || got.IsZero() || k == "store.path" {
				// A zero value (a nil *bool, 0, "") is defaulted where it is
				// used (web.session_ttl in the console); store.path is
				// resolved against the file's directory.
				continue
			}
			lit := m[1]
			if got.Kind() == reflect.String {
				lit = strconv.Quote(lit)
			}
			want := reflect.New(got.Type())
			if err := yaml.Unmarshal([]byte(lit), want.Interface()); err != nil {
				t.Errorf("docs/configuration.md:%d: `%s` default `%s` is not %s: %v", n+1, k, m[1], typeWord(got.Type()), err)
				continue
			}
			checked++
			if !reflect.DeepEqual(got.Interface(), want.Elem().Interface()) {
				t.Errorf("docs/configuration.md:%d: `%s` defaults to %v in the code; the reference says `%s`", n+1, k, got.Interface(), m[1])
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d defaults, want at least 30: the reference changed shape", checked)
	}
}
