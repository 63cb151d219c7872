package countersign

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/countersign/countersign"

// pendingImports are known breaches of the dependency rules, each with why
// it is tolerated for now. The test fails when a breach listed here is gone,
// so the list only shrinks.
var pendingImports = map[string]string{}

// TestImportRules enforces the dependency rules ARCHITECTURE.md states,
// over every package's non-test imports (go/build): dependencies point
// inward; policy and kv import nothing of Countersign; an adapter imports
// only the core (bot, bot/chat) and kv, never policy, never a sibling
// adapter, never a tool package; nothing but cmd, config (the schema of
// config.yaml, which checks values against the adapters' own rules), bench
// and the test helpers imports an adapter, and only cmd imports config. TestAdaptersLeaveDeliveryToTheOutbox
// (delivery_rules_test.go) adds the delivery contract's rules: no adapter
// decides retry or give-up on its own.
func TestImportRules(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages, want at least 10: is the test running at the module root?", len(pkgs))
	}
	seenPending := map[string]bool{}
	for pkg, imports := range pkgs {
		for _, imp := range imports {
			if why := breach(pkg, imp); why != "" {
				key := pkg + " -> " + imp
				if _, ok := pendingImports[key]; ok {
					seenPending[key] = true
					continue
				}
				t.Errorf("%s imports %s: %s", pkg, imp, why)
			}
		}
	}
	for key := range pendingImports {
		if !seenPending[key] {
			t.Errorf("pendingImports lists %q, which no longer happens: remove it from the list", key)
		}
	}
}

// sharedAdapters are the adapter packages every adapter may import, with
// what they are: leaves that import nothing of Countersign.
var sharedAdapters = map[string]string{
	"adapters/jwks":       "the JWKS verifier the token checks share",
	"adapters/httpstatus": "the status recorder of the edges that report a response's status",
}

// breach says which rule pkg importing imp (both relative to the module,
// "" for the root) breaks, or "".
func breach(pkg, imp string) string {
	top := func(p string) string { return strings.SplitN(p, "/", 2)[0] }
	adapter := func(p string) string { // "adapters/slack" for adapters/slack/...
		parts := strings.Split(p, "/")
		if len(parts) >= 2 && parts[0] == "adapters" {
			return parts[0] + "/" + parts[1]
		}
		return ""
	}
	switch {
	case pkg == "policy" || pkg == "kv" || pkg == "receipt":
		return pkg + " imports nothing of Countersign"
	case pkg == "client":
		if imp != "receipt" {
			return "client (imported by agent runtimes) imports only the standard library and receipt"
		}
	case pkg == "client/claudecode":
		if imp != "client" && imp != "receipt" {
			return "client/claudecode (the Claude Code hook) imports only the standard library, client and receipt"
		}
	case pkg == "memory" || pkg == "approvals":
		if imp != "kv" && imp != "policy" {
			return pkg + " imports only kv and policy"
		}
	case pkg == "bot":
		if !slices.Contains([]string{"kv", "policy", "approvals", "memory", "receipt"}, imp) {
			return "bot imports only kv, policy, receipt and the domain packages"
		}
	case pkg == "bot/bottest" || strings.HasPrefix(pkg, "bot/bottest/"):
		// Test helpers: a real store (adapters/bolt) and the core.
		if imp != "adapters/bolt" && imp != "bot" && imp != "bot/bottest" && imp != "kv" && imp != "kv/kvtest" {
			return "the test helpers import only bot, kv, kv/kvtest and adapters/bolt"
		}
	case strings.HasPrefix(pkg, "bot/"):
		if top(imp) == "adapters" || top(imp) == "cmd" {
			return "the core never imports an adapter or cmd"
		}
		if strings.HasPrefix(imp, "bot/") && !strings.HasPrefix(imp, pkg+"/") {
			return "a bot subpackage never imports a sibling (tools and chat are independent areas over bot)"
		}
	case sharedAdapters[pkg] != "":
		return pkg + " (" + sharedAdapters[pkg] + ") imports nothing of Countersign"
	case adapter(pkg) != "":
		if a := adapter(imp); a != "" && a != adapter(pkg) && sharedAdapters[imp] == "" {
			return "an adapter never imports a sibling adapter"
		}
		if adapter(imp) == "" && imp != "bot" && imp != "bot/chat" && imp != "kv" {
			return "an adapter imports only bot, bot/chat and kv (never policy, a domain package or a tool package): decisions go through bot/chat, rules through bot"
		}
	}
	if imp == "config" && top(pkg) != "cmd" {
		return "only cmd imports config (the schema of config.yaml stays at the edge; a library takes its options as arguments)"
	}
	if adapter(imp) != "" && adapter(pkg) == "" && top(pkg) != "cmd" && pkg != "config" && top(pkg) != "bench" && !strings.HasPrefix(pkg, "bot/bottest") {
		return "nothing but cmd, config, bench and the test helpers imports an adapter"
	}
	return ""
}

// modulePackages maps each package of the module (relative path) to its
// non-test imports within the module (relative paths).
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			if _, ok := err.(*build.MultiplePackageError); ok {
				return err
			}
			return nil
		}
		rel := filepath.ToSlash(path)
		if rel == "." {
			rel = ""
		}
		var imps []string
		for _, imp := range p.Imports {
			if imp == module {
				imps = append(imps, "")
			} else if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				imps = append(imps, r)
			}
		}
		out[rel] = imps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("go.mod"); err != nil {
		t.Fatalf("not at the module root: %v", err)
	}
	return out
}
