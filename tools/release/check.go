// Package release checks a directory written by scripts/release: every
// target's binary and SBOM is there, SHA256SUMS matches every file and
// lists them all, each binary was built as a release must be (from the
// given commit, unmodified, static, with -trimpath, for its target), and
// each SBOM parses as CycloneDX and describes exactly its binary.
package release

import (
	"bufio"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// Module is Countersign's module path, and MainPackage its command's.
const (
	Module      = "github.com/countersign/countersign"
	MainPackage = Module + "/cmd/countersign"
)

// SumsFile is the checksum file of a release (sha256sum's format).
const SumsFile = "SHA256SUMS"

// Targets are the platforms of a full release, as GOOS/GOARCH.
var Targets = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

// BinaryName is the file name of the binary for target (GOOS/GOARCH).
func BinaryName(target string) string {
	goos, goarch, _ := strings.Cut(target, "/")
	name := "countersign_" + goos + "_" + goarch
	if goos == "windows" {
		name += ".exe"
	}
	return name
}

// SBOMName is the file name of the SBOM of the binary called bin.
func SBOMName(bin string) string { return bin + ".cdx.json" }

// Options say what a release must be.
type Options struct {
	// Targets must all be in the release (GOOS/GOARCH); nil means Targets.
	Targets []string
	// Revision is the commit every binary must have been built from.
	Revision string
}

// Binary is what Check found about one binary.
type Binary struct {
	Name    string
	Target  string
	Version string // the module version stamped in it
	SHA256  string
	Modules int // the modules linked in, as the SBOM lists them (std included)
}

// Report is what Check found.
type Report struct {
	Files    int // files listed in SHA256SUMS
	Binaries []Binary
}

// Check checks the release in dir against o. It reports every problem it
// finds, joined, not only the first.
func Check(dir string, o Options) (Report, error) {
	var rep Report
	targets := o.Targets
	if targets == nil {
		targets = Targets
	}
	if o.Revision == "" {
		return rep, errors.New("release: no revision to check against")
	}
	sums, err := readSums(filepath.Join(dir, SumsFile))
	if err != nil {
		return rep, err
	}
	rep.Files = len(sums)
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	// Every file is listed, and every listed file has its sum.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return rep, err
	}
	for _, e := range entries {
		if e.Name() == SumsFile {
			continue
		}
		if _, ok := sums[e.Name()]; !ok {
			add("%s is in the release but not in %s", e.Name(), SumsFile)
		}
	}
	for _, name := range sortedKeys(sums) {
		got, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			add("%s: %v", name, err)
			continue
		}
		if got != sums[name] {
			add("%s: sha256 %s, but %s says %s", name, got, SumsFile, sums[name])
		}
	}

	for _, target := range targets {
		name := BinaryName(target)
		if _, ok := sums[name]; !ok {
			add("%s: the binary for %s is missing", name, target)
			continue
		}
		b, bi, err := checkBinary(filepath.Join(dir, name), target, o.Revision)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", name, err))
			continue
		}
		b.Name, b.SHA256 = name, sums[name]
		sbom := SBOMName(name)
		if _, ok := sums[sbom]; !ok {
			add("%s: the SBOM of %s is missing", sbom, name)
			continue
		}
		n, err := checkSBOM(filepath.Join(dir, sbom), bi, target, b.SHA256)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", sbom, err))
			continue
		}
		b.Modules = n
		rep.Binaries = append(rep.Binaries, b)
	}
	return rep, errors.Join(problems...)
}

var sumLine = regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)

// readSums reads a sha256sum file: one "HASH  NAME" a line.
func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := sumLine.FindStringSubmatch(sc.Text())
		if m == nil {
			return nil, fmt.Errorf("%s line %d: %q is not \"<sha256 hex>  <file>\"", SumsFile, n, sc.Text())
		}
		if _, dup := sums[m[2]]; dup {
			return nil, fmt.Errorf("%s line %d: %s is listed twice", SumsFile, n, m[2])
		}
		sums[m[2]] = m[1]
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(sums) == 0 {
		return nil, fmt.Errorf("%s lists no file", SumsFile)
	}
	return sums, nil
}

// checkBinary reads the build information of the binary at path and
// checks that it was built as a release: the command, from revision,
// unmodified, static, -trimpath, for target.
func checkBinary(path, target, revision string) (Binary, *debug.BuildInfo, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return Binary{}, nil, fmt.Errorf("no Go build information: %w", err)
	}
	goos, goarch, _ := strings.Cut(target, "/")
	want := map[string]string{
		"vcs.revision": revision,
		"vcs.modified": "false",
		"CGO_ENABLED":  "0",
		"-trimpath":    "true",
		"GOOS":         goos,
		"GOARCH":       goarch,
	}
	have := map[string]string{}
	for _, s := range bi.Settings {
		have[s.Key] = s.Value
	}
	var problems []string
	if bi.Path != MainPackage {
		problems = append(problems, fmt.Sprintf("it is %s, not %s", bi.Path, MainPackage))
	}
	for _, k := range sortedKeys(want) {
		if have[k] != want[k] {
			problems = append(problems, fmt.Sprintf("%s is %q, want %q", k, have[k], want[k]))
		}
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" || strings.HasSuffix(v, "+dirty") {
		problems = append(problems, fmt.Sprintf("module version %q: a release carries the version of a clean commit", v))
	}
	if len(problems) > 0 {
		return Binary{}, nil, errors.New(strings.Join(problems, "; "))
	}
	return Binary{Target: target, Version: v}, bi, nil
}

// checkSBOM decodes the CycloneDX JSON at path and checks that it describes
// the binary: the module and its version, the binary's SHA-256 and target,
// and exactly the modules linked into it (and the standard library).
func checkSBOM(path string, bi *debug.BuildInfo, target, sha string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		return 0, fmt.Errorf("not CycloneDX JSON: %w", err)
	}
	var problems []string
	if bom.BOMFormat != cdx.BOMFormat {
		problems = append(problems, fmt.Sprintf("bomFormat %q, want %q", bom.BOMFormat, cdx.BOMFormat))
	}
	if bom.SpecVersion < cdx.SpecVersion1_4 {
		problems = append(problems, fmt.Sprintf("specVersion %s, want 1.4 or later", bom.SpecVersion))
	}
	if bom.Metadata == nil || bom.Metadata.Component == nil {
		return 0, errors.New("no metadata.component: the SBOM does not say what it describes")
	}
	main := bom.Metadata.Component
	if main.Name != Module || main.Version != bi.Main.Version {
		problems = append(problems, fmt.Sprintf("it describes %s@%s, the binary is %s@%s", main.Name, main.Version, Module, bi.Main.Version))
	}
	goos, goarch, _ := strings.Cut(target, "/")
	props := map[string]string{}
	if bom.Metadata.Properties != nil {
		for _, p := range *bom.Metadata.Properties {
			props[p.Name] = p.Value
		}
	}
	for k, v := range map[string]string{
		"cdx:gomod:binary:hash:SHA-256": sha,
		"cdx:gomod:build:env:GOOS":      goos,
		"cdx:gomod:build:env:GOARCH":    goarch,
	} {
		if props[k] != v {
			problems = append(problems, fmt.Sprintf("property %s is %q, want %q", k, props[k], v))
		}
	}
	want := map[string]bool{"std@" + bi.GoVersion: true}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		want[d.Path+"@"+d.Version] = true
	}
	got := map[string]bool{}
	if bom.Components != nil {
		for _, c := range *bom.Components {
			got[c.Name+"@"+c.Version] = true
		}
	}
	for _, m := range sortedKeys(want) {
		if !got[m] {
			problems = append(problems, "the binary links "+m+", which the SBOM does not list")
		}
	}
	for _, m := range sortedKeys(got) {
		if !want[m] {
			problems = append(problems, "the SBOM lists "+m+", which the binary does not link")
		}
	}
	if len(problems) > 0 {
		return 0, errors.New(strings.Join(problems, "; "))
	}
	return len(got), nil
}

// fileSHA256 is the hex SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
