package teams

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// manifestPath is the Teams app manifest the docs ship (docs/teams.md).
const manifestPath = "../../docs/teams/manifest.json"

// teamsSchema compiles the published Teams app manifest schema for
// manifestVersion, as Microsoft ships it in the npm package
// @microsoft/app-manifest (build/json-schemas/teams/v<version>/), under
// the URL manifests name it by in "$schema".
func teamsSchema(t *testing.T, url, version string) *jsonschema.Schema {
	t.Helper()
	dir := nodetest.Modules(t, "@microsoft/app-manifest")
	file := filepath.Join(dir, "@microsoft", "app-manifest", "build", "json-schemas", "teams", "v"+version, "MicrosoftTeams.schema.json")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no published schema for manifestVersion %q (%v), want it in testdata", version, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v, want a JSON schema", file, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compiling %s: %v, want it compiled", file, err)
	}
	return s
}

// TestManifestMatchesThePublishedSchema validates docs/teams/manifest.json
// against the Teams app manifest schema of its manifestVersion, from
// Microsoft's npm package, with a JSON Schema validator (formats
// asserted); and checks the validator refuses manifests the schema
// forbids, so a pass means something.
func TestManifestMatchesThePublishedSchema(t *testing.T) {
	raw, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		Schema  string `json:"$schema"`
		Version string `json:"manifestVersion"`
		ID      string `json:"id"`
		Bots    []struct {
			BotID string `json:"botId"`
		} `json:"bots"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		t.Fatalf("%s: %v, want JSON", manifestPath, err)
	}
	if want := "https://developer.microsoft.com/en-us/json-schemas/teams/v" + head.Version + "/MicrosoftTeams.schema.json"; head.Schema != want {
		t.Errorf("$schema = %q, want %q (the schema of manifestVersion %s)", head.Schema, want, head.Version)
	}
	if len(head.Bots) != 1 || head.Bots[0].BotID != head.ID {
		t.Errorf("bots = %+v, want one bot whose botId is the app id %s (docs/teams.md says to put the app id in both)", head.Bots, head.ID)
	}
	schema := teamsSchema(t, head.Schema, head.Version)
	valid := func(doc []byte) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		return schema.Validate(v)
	}
	if err := valid(raw); err != nil {
		t.Fatalf("%s does not match the published schema, want it valid:\n%v", manifestPath, err)
	}
	broken := map[string]func(m map[string]any){
		"an unknown property":         func(m map[string]any) { m["botEndpoint"] = "https://x.example" },
		"no developer":                func(m map[string]any) { delete(m, "developer") },
		"an accent colour name":       func(m map[string]any) { m["accentColor"] = "blue" },
		"a bot id that is not a GUID": func(m map[string]any) { m["bots"].([]any)[0].(map[string]any)["botId"] = "countersign" },
		"an unknown bot scope":        func(m map[string]any) { m["bots"].([]any)[0].(map[string]any)["scopes"] = []any{"everywhere"} },
	}
	for name, mutate := range broken {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		mutate(m)
		doc, _ := json.Marshal(m)
		if err := valid(doc); err == nil {
			t.Errorf("a manifest with %s passes the schema check, want it refused: the check checks nothing", name)
		} else if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("%s: refused without saying why, want the schema's reason", name)
		}
	}
}
