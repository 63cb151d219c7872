package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	countersign "github.com/countersign/countersign"
)

func TestEmbeddedDefaultConfigIsValid(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(countersign.DefaultConfig, t.TempDir())
	if err != nil {
		t.Fatalf("the default config.yaml does not load: %v", err)
	}
	if cfg.Listen != "127.0.0.1:8080" || filepath.Base(cfg.Store.Path) != "countersign.db" {
		t.Fatalf("listen %q store %q, want %q and a file %q: the contract defaults changed", cfg.Listen, cfg.Store.Path, "127.0.0.1:8080", "countersign.db")
	}
	if s, ok := cfg.schema.Lookup("Current Medication"); !ok || s.Name != "active_medication" || !s.Confirm {
		t.Fatalf("the default declares active_medication (confirm) with alias current_medication; got %+v %v", s, ok)
	}
	if cfg.Sweep.Schedule != "@every 1m" || cfg.Memory.CriticalBudget != 200 || cfg.Memory.RecallContext != 40 {
		t.Fatalf("defaults: %+v %+v; want sweep %q, critical budget 200, recall context 40", cfg.Sweep, cfg.Memory, "@every 1m")
	}
}

func TestRootConfigIsTheEmbeddedOne(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(countersign.DefaultConfig) {
		t.Fatal("config.yaml differs from the embedded default")
	}
}

func TestConfigReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	bad := `
listen: nowhere
memory:
  critical_budget: -1
  slots:
    - name: ""
tools:
  - name: drop_table
    category: dangerous
    approvers: {roles: [agent, owner]}
    quorum: -1
slack:
  mode: carrier-pigeon
  channels: {}
principals:
  - name: dr_smith
    role: boss
sweep:
  schedule: "every minute"
log:
  format: xml
`
	_, err := Parse([]byte(bad), t.TempDir())
	if err == nil {
		t.Fatal("a bad config loaded")
	}
	for _, want := range []string{
		`listen: "nowhere" is not host:port`,
		"memory.critical_budget: must be at least 1",
		"memory.slots: slots[0].name: required",
		`tools[0].category: "dangerous" is not a category`,
		`tools[0].approvers.roles[0]: role "agent" cannot approve`,
		"tools[0].approvers.roles[1]: Unknown role 'owner'",
		"tools[0].quorum: must be at least 1",
		`slack.mode: "carrier-pigeon" is not a mode`,
		"slack.bot_token_env: required",
		"slack.channels.default: required",
		"principals[0].role: Unknown role 'boss'",
		"principals[0]: maps no chat identity",
		`sweep.schedule: "every minute"`,
		`log.format: "xml"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing problem %q in:\n%v", want, err)
		}
	}
}

func TestConfigUnknownKeyIsAnError(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("listen: 127.0.0.1:1\nstroe:\n  path: x.db\n"), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "stroe") {
		t.Fatalf("err = %v, want the unknown key named", err)
	}
	_, err = Parse([]byte("listen: [\n"), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not valid YAML") {
		t.Fatalf("err = %v, want one saying %q", err, "not valid YAML")
	}
}

func TestSlotSchemaFileProblemsNameTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := map[string]string{
		"missing.json":   "cannot read",
		"malformed.json": "malformed JSON",
		"unknown.json":   `unknown field "confrim"`,
		"noslots.json":   `missing "slots" array`,
	}
	files := map[string]string{
		"malformed.json": `{"slots": [`,
		"unknown.json":   `{"slots": [{"name": "a", "confrim": true}]}`,
		"noslots.json":   `{}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range cases {
		_, err := Parse([]byte("memory:\n  slot_schema: "+name+"\n"), dir)
		if err == nil || !strings.Contains(err.Error(), "memory.slot_schema") || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want memory.slot_schema, the file name and %q", name, err, want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ok.json"), []byte(`{"slots": [{"name": "active_medication", "aliases": ["meds"], "confirm": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte("memory:\n  slot_schema: ok.json\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := cfg.schema.Lookup("MEDS"); !ok || s.Name != "active_medication" {
		t.Fatalf("alias lookup = %+v %v, want slot %q", s, ok, "active_medication")
	}
}

func TestConfigProblemsNameTheKeyPath(t *testing.T) {
	t.Parallel()
	bad := `
http:
  rate_brust: 10
  rate_burst: -5
  read_timeout: soon
memory:
  critical_budget: lots
  slots:
    - name: allergy
      confrim: true
tools:
  - name: x
    category: Destructive
    quorum: [1]
log:
  format: xml
`
	_, err := Parse([]byte(bad), t.TempDir())
	if err == nil {
		t.Fatal("a bad config loaded")
	}
	for _, want := range []string{
		"http.rate_brust: not a known key; did you mean http.rate_burst? (line 3)",
		"http.rate_burst: must not be negative",
		`http.read_timeout: "soon" is not a duration`,
		`memory.critical_budget: "lots" is not a whole number`,
		"memory.slots[0].confrim: not a known key; did you mean memory.slots[0].confirm?",
		"tools[0].quorum: must be a single value, not a list",
		`log.format: "xml"`, // a semantic problem, reported with the decode problems
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing problem %q in:\n%v", want, err)
		}
	}
	for _, not := range []string{"HTTPConfig", "main.", "http.rate_per_minute", "tools[0].category"} {
		if strings.Contains(err.Error(), not) {
			t.Errorf("%q should not appear in:\n%v", not, err)
		}
	}
}

func TestConfigCategoryCaseAgreesWithTheRegistry(t *testing.T) {
	t.Parallel()
	// policy.ParseCategory folds case, and so does the config check now:
	// a category the tool registry accepts is never refused at load.
	cfg, err := Parse([]byte("tools:\n  - name: drop\n    category: Destructive\n    commands:\n      - {command: kubectl delete, category: DESTRUCTIVE}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tools[0].Category != "Destructive" {
		t.Fatalf("category = %q, want %q", cfg.Tools[0].Category, "Destructive")
	}
	_, err = Parse([]byte("tools:\n  - name: e\n    commands:\n      - {command: \"rm; ls\", category: mutating}\n      - {command: ls}\n"), t.TempDir())
	for _, want := range []string{"tools[0].commands[0]: command \"rm; ls\" holds the shell character", "tools[0].commands[1]: command \"ls\" needs a category"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
}

func TestConfigValidationReadsNoFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := &Config{dir: dir, Memory: MemoryConfig{SlotSchema: "absent.json"}}
	cfg.applyDefaults()
	p := &problems{}
	cfg.validate(p)
	if err := p.err(); err != nil {
		t.Fatalf("validate reported %v: it must not look at files", err)
	}
	cfg.loadFiles(p)
	if err := p.err(); err == nil || !strings.Contains(err.Error(), "memory.slot_schema: cannot read") {
		t.Fatalf("loadFiles: %v, want an error saying %q", err, "memory.slot_schema: cannot read")
	}
}

// configKeyPaths lists every key path of the config: "http.rate_burst",
// "tools[].name", "memory.slots[].confirm". A map of free keys (channels)
// or a free value (a tool's schema) ends its path; the entries of a map of
// named sections are written "oncall.<name>.people".
func configKeyPaths(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		for name, ft := range yamlFields(t) {
			p := join(prefix, name)
			*out = append(*out, p)
			configKeyPaths(ft, p, out)
		}
	case reflect.Map:
		// A map of named entries (oncall: {ops: {...}}): its entries' keys
		// are written with <name> for the free key.
		if e := t.Elem(); e.Kind() == reflect.Struct {
			configKeyPaths(e, prefix+".<name>", out)
		}
	case reflect.Slice:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		if e.Kind() == reflect.Struct {
			configKeyPaths(e, prefix+"[]", out)
		}
	}
}

func TestConfigurationReferenceListsEveryKey(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	configKeyPaths(reflect.TypeOf(Config{}), "", &keys)
	if len(keys) < 80 {
		t.Fatalf("found only %d keys, want at least 80: the walk is broken", len(keys))
	}
	for _, k := range keys {
		// Sections are headings, not rows: their keys are listed below them.
		if !strings.Contains(string(doc), "`"+k+"`") && !isSection(k) {
			t.Errorf("docs/configuration.md does not list `%s` (with its default)", k)
		}
	}
}

// TestConfigurationReferenceListsOnlyKeys: every key a row of
// docs/configuration.md names (its first column) is one the config
// accepts, so a reader never copies a key that start-up refuses as unknown.
func TestConfigurationReferenceListsOnlyKeys(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	configKeyPaths(reflect.TypeOf(Config{}), "", &keys)
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
	}
	rows := 0
	for n, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		rows++
		first := strings.Split(line, "|")[1]
		for _, part := range strings.Split(first, "`")[1:] {
			if part = strings.TrimSpace(part); part == "" || part == "," {
				continue
			}
			if !known[part] {
				t.Errorf("docs/configuration.md:%d documents `%s`, which the config does not accept (an unknown key)", n+1, part)
			}
		}
	}
	if rows < 80 {
		t.Fatalf("found only %d key rows in docs/configuration.md, want at least 80: the page changed shape", rows)
	}
}

// isSection reports whether key is a mapping of further keys (store, http,
// tools[].approvers …) rather than a value.
func isSection(key string) bool {
	var keys []string
	configKeyPaths(reflect.TypeOf(Config{}), "", &keys)
	for _, k := range keys {
		if strings.HasPrefix(k, key+".") || strings.HasPrefix(k, key+"[].") {
			return true
		}
	}
	return false
}

// TestConfigAllowedHostsAndOrigins: the names and origins the HTTP
// surfaces answer to follow from listen, web.public_url and the http
// lists; an entry of the wrong shape is refused with what to write.
func TestConfigAllowedHostsAndOrigins(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte("listen: countersign.internal:8080\nweb:\n  public_url: https://cs.example.org:8443\nhttp:\n  allowed_hosts: [proxy.local]\n  allowed_origins: [https://console.example]\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(cfg.AllowedHosts(), " "), "countersign.internal cs.example.org proxy.local"; got != want {
		t.Errorf("allowedHosts = %q, want %q", got, want)
	}
	if got, want := strings.Join(cfg.AllowedOrigins(), " "), "https://cs.example.org:8443 https://console.example"; got != want {
		t.Errorf("allowedOrigins = %q, want %q", got, want)
	}
	cfg, err = Parse([]byte("listen: 0.0.0.0:8080\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.AllowedHosts(); len(got) != 0 {
		t.Errorf("listen on 0.0.0.0 adds names %q, want none (IP addresses and localhost are always accepted)", got)
	}
	_, err = Parse([]byte("http:\n  allowed_hosts: [\"https://cs.example\", \"cs.example/ui\", \"cs.example:https\", ok.example]\n  allowed_origins: [cs.example, \"https://cs.example/ui\", \"http://localhost:3000\"]\n"), t.TempDir())
	if err == nil {
		t.Fatal("bad allowed_hosts and allowed_origins loaded")
	}
	for _, want := range []string{"http.allowed_hosts[0]", "http.allowed_hosts[1]", "http.allowed_hosts[2]", "http.allowed_origins[0]", "http.allowed_origins[1]", "an origin with its scheme goes in http.allowed_origins"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	for _, not := range []string{"allowed_hosts[3]", "allowed_origins[2]"} {
		if strings.Contains(err.Error(), not) {
			t.Errorf("a good entry is refused (%s):\n%v", not, err)
		}
	}
}

// TestSlackIdentitiesAreCheckedAtLoad: a malformed slack.team_id and a
// principal's Slack user that names no workspace (or a malformed one) are
// refused when the file is read, each under its key and saying what to
// write, before anything starts.
func TestSlackIdentitiesAreCheckedAtLoad(t *testing.T) {
	base := "slack:\n  mode: http\n  bot_token_env: SLACK_BOT_TOKEN\n  signing_secret_env: SLACK_SIGNING_SECRET\n  channels: {default: C0DEFAULT}\nTEAM" +
		"principals:\n  - name: dr_lee\n    role: member\n    slack: USER\n"
	for _, c := range []struct{ team, user, want string }{
		{"", "U0123ABC", `principals[0].slack: "U0123ABC" does not say which Slack workspace it belongs to`},
		{"  team_id: t1\n", "U0123ABC", `slack.team_id: "t1" is not a Slack workspace id`},
		{"  team_id: T1\n", "X1/U0123ABC", `principals[0].slack: "X1/U0123ABC": "X1" is not a Slack workspace id`},
		{"  team_id: T1\n", "T1/<!channel>", `principals[0].slack:`},
		{"  team_id: T1\n", "U0123ABC", ""},
		{"", "T1/U0123ABC", ""},
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		doc := strings.NewReplacer("TEAM", c.team, "USER", c.user).Replace(base)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("team %q, user %q: Load said %v, want %q", c.team, c.user, err, c.want)
		}
	}
}
