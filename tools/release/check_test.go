package release

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// testTargets are built by the test: one with .exe, one without.
var testTargets = []string{"linux/amd64", "windows/amd64"}

// gitRepo makes a git repository holding a command at the path of
// Countersign's, commits it, and returns its directory and commit.
func gitRepo(t *testing.T) (string, string) {
	t.Helper()
	src := t.TempDir()
	write(t, filepath.Join(src, "go.mod"), "module "+Module+"\n\ngo 1.26\n")
	write(t, filepath.Join(src, "cmd/countersign/main.go"), "package main\n\nfunc main() { println(\"countersign\") }\n")
	git(t, src, "init", "-q")
	git(t, src, "add", "-A")
	git(t, src, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "the command")
	return src, strings.TrimSpace(git(t, src, "rev-parse", "HEAD"))
}

// buildRelease builds the command of src for each target into dir as
// scripts/release does, with an SBOM of each binary and SHA256SUMS.
func buildRelease(t *testing.T, src, dir string, targets []string) {
	t.Helper()
	var sums bytes.Buffer
	for _, target := range targets {
		goos, goarch, _ := strings.Cut(target, "/")
		name := BinaryName(target)
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/countersign")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=-buildvcs=true -trimpath", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", target, err, out)
		}
		writeSBOM(t, filepath.Join(dir, name))
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, e.Name())
	}
	write(t, filepath.Join(dir, SumsFile), sums.String())
}

// writeSBOM writes the CycloneDX SBOM cyclonedx-gomod's bin mode writes of
// the binary at bin: its module, hash, target and linked modules.
func writeSBOM(t *testing.T, bin string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := fileSHA256(bin)
	props := []cdx.Property{{Name: "cdx:gomod:binary:hash:SHA-256", Value: sum}}
	for _, s := range bi.Settings {
		if s.Key == "GOOS" || s.Key == "GOARCH" {
			props = append(props, cdx.Property{Name: "cdx:gomod:build:env:" + s.Key, Value: s.Value})
		}
	}
	comps := []cdx.Component{{Type: cdx.ComponentTypeLibrary, Name: "std", Version: bi.GoVersion}}
	for _, d := range bi.Deps {
		comps = append(comps, cdx.Component{Type: cdx.ComponentTypeLibrary, Name: d.Path, Version: d.Version})
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{Component: &cdx.Component{Type: cdx.ComponentTypeApplication, Name: Module, Version: bi.Main.Version}, Properties: &props}
	bom.Components = &comps
	f, err := os.Create(SBOMName(bin))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON).Encode(bom); err != nil {
		t.Fatal(err)
	}
}

// TestCheck builds a release of a small command as scripts/release does,
// checks it, then breaks it in each way a release can be wrong and checks
// that Check names the problem.
func TestCheck(t *testing.T) {
	src, rev := gitRepo(t)
	good := t.TempDir()
	buildRelease(t, src, good, testTargets)
	o := Options{Targets: testTargets, Revision: rev}
	rep, err := Check(good, o)
	if err != nil {
		t.Fatalf("Check of a good release: %v", err)
	}
	if rep.Files != 4 || len(rep.Binaries) != 2 || rep.Binaries[1].Name != "countersign_windows_amd64.exe" || !strings.HasPrefix(rep.Binaries[0].Version, "v0.0.0-") {
		t.Fatalf("Check of a good release: %+v, want 4 files, two binaries (the second countersign_windows_amd64.exe), pseudo-versions", rep)
	}

	linux := BinaryName("linux/amd64")
	tests := []struct {
		name  string
		opts  Options
		spoil func(t *testing.T, dir string)
		want  string
	}{
		{"a binary changed after SHA256SUMS was written", o, func(t *testing.T, dir string) {
			appendTo(t, filepath.Join(dir, linux), "x")
		}, linux + ": sha256 "},
		{"a file SHA256SUMS does not list", o, func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "notes.txt"), "hello")
		}, "notes.txt is in the release but not in SHA256SUMS"},
		{"a target missing", Options{Targets: append(testTargets, "darwin/arm64"), Revision: rev}, nil,
			"countersign_darwin_arm64: the binary for darwin/arm64 is missing"},
		{"another commit", Options{Targets: testTargets, Revision: strings.Repeat("0", 40)}, nil,
			`vcs.revision is "` + rev + `", want "` + strings.Repeat("0", 40) + `"`},
		{"an SBOM that is not JSON", o, func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, SBOMName(linux)), "<bom/>")
			resum(t, dir)
		}, SBOMName(linux) + ": not CycloneDX JSON"},
		{"an SBOM of another binary", o, func(t *testing.T, dir string) {
			other := filepath.Join(dir, SBOMName(BinaryName("windows/amd64")))
			b, _ := os.ReadFile(other)
			write(t, filepath.Join(dir, SBOMName(linux)), string(b))
			resum(t, dir)
		}, `property cdx:gomod:build:env:GOOS is "windows", want "linux"`},
		{"an SBOM that lists a module the binary does not link", o, func(t *testing.T, dir string) {
			p := filepath.Join(dir, SBOMName(linux))
			b, _ := os.ReadFile(p)
			b = bytes.Replace(b, []byte(`"components":[`), []byte(`"components":[{"type":"library","name":"example.org/extra","version":"v1.0.0"},`), 1)
			write(t, p, string(b))
			resum(t, dir)
		}, "the SBOM lists example.org/extra@v1.0.0, which the binary does not link"},
		{"a build with uncommitted changes", o, func(t *testing.T, dir string) {
			write(t, filepath.Join(src, "cmd/countersign/extra.go"), "package main\n")
			git(t, src, "add", "-A")
			defer git(t, src, "reset", "-q", "--hard")
			os.Remove(filepath.Join(dir, SumsFile))
			os.Remove(filepath.Join(dir, linux))
			os.Remove(filepath.Join(dir, SBOMName(linux)))
			buildRelease(t, src, dir, []string{"linux/amd64"})
		}, `vcs.modified is "true", want "false"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, good, dir)
			if tt.spoil != nil {
				tt.spoil(t, dir)
			}
			_, err := Check(dir, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: got %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// resum rewrites SHA256SUMS for the files now in dir, as if the release
// had been written so.
func resum(t *testing.T, dir string) {
	t.Helper()
	var sums bytes.Buffer
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == SumsFile {
			continue
		}
		sum, _ := fileSHA256(filepath.Join(dir, e.Name()))
		fmt.Fprintf(&sums, "%s  %s\n", sum, e.Name())
	}
	write(t, filepath.Join(dir, SumsFile), sums.String())
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
