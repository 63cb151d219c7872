package image

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// rootfs writes the image's root file system with deploy/image/rootfs, from
// this machine's Debian packages.
func rootfs(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("dpkg-query"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("no dpkg here: the image's files come from Debian's packages (CI installs them)")
	}
	dir := filepath.Join(t.TempDir(), "rootfs")
	out, err := exec.Command("../../deploy/image/rootfs", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/image/rootfs: %v\n%s", err, out)
	}
	return dir
}

// binaries builds a small command at Countersign's path, committed in a
// git repository, for each platform, as scripts/release builds (static,
// -trimpath, VCS stamped); env adds to the build's environment.
func binaries(t *testing.T, env ...string) (map[string]string, string) {
	t.Helper()
	src := t.TempDir()
	write(t, filepath.Join(src, "go.mod"), "module github.com/countersign/countersign\n\ngo 1.26\n")
	write(t, filepath.Join(src, "cmd/countersign/main.go"), "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"countersign from the image\") }\n")
	run(t, src, "git", "init", "-q")
	run(t, src, "git", "add", "-A")
	run(t, src, "git", "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "the command")
	rev := strings.TrimSpace(run(t, src, "git", "rev-parse", "HEAD"))
	out := map[string]string{}
	for _, p := range Platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		bin := filepath.Join(t.TempDir(), "countersign")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/countersign")
		cmd.Dir = src
		cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=-buildvcs=true -trimpath", "GOTOOLCHAIN=local"), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", p, err, b)
		}
		out[p] = bin
	}
	return out, rev
}

// TestBuildAndCheck builds the layout from the real root file system and
// two binaries, checks it, runs the binary taken out of its layer, and
// builds it again to the same bytes.
func TestBuildAndCheck(t *testing.T) {
	root := rootfs(t)
	bins, rev := binaries(t)
	out := filepath.Join(t.TempDir(), "oci")
	version, revision, err := Build(BuildOptions{RootFS: root, Binaries: bins, Packages: "ca-certificates, tzdata", Out: out})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if revision != rev || !strings.HasPrefix(version, "v0.0.0-") {
		t.Errorf("Build: version %q revision %q; want a pseudo-version and %s", version, revision, rev)
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	extract := filepath.Join(t.TempDir(), "countersign")
	imgs, err := Check(out, CheckOptions{Revision: rev, Extract: extract, ExtractPlatform: host})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(imgs) != 2 || imgs[0].Layers != 2 || imgs[0].Certs < 100 || imgs[0].Zones < 300 {
		t.Errorf("Check: %+v; want two images of two layers, Debian's certificates and zones", imgs)
	}
	if slices.Contains(Platforms, host) {
		b, err := exec.Command(extract).CombinedOutput()
		if err != nil || string(b) != "countersign from the image\n" {
			t.Errorf("the binary from the layer: %v %q", err, b)
		}
	}
	again := filepath.Join(t.TempDir(), "oci")
	if _, _, err := Build(BuildOptions{RootFS: root, Binaries: bins, Packages: "ca-certificates, tzdata", Out: again}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(out, "index.json"))
	b, _ := os.ReadFile(filepath.Join(again, "index.json"))
	if string(a) != string(b) {
		t.Errorf("two builds of the same inputs differ:\n%s\n%s", a, b)
	}
}

// TestCheckRefuses: an image whose config runs as root, has another
// entrypoint or lacks the revision label, and a build from a binary that
// is not static, are each refused with what is wrong.
func TestCheckRefuses(t *testing.T) {
	root := rootfs(t)
	bins, rev := binaries(t)
	out := filepath.Join(t.TempDir(), "oci")
	if _, _, err := Build(BuildOptions{RootFS: root, Binaries: bins, Out: out}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(*v1.Config)
		want   string
	}{
		{"root", func(c *v1.Config) { c.User = "" }, `user "", want "65532:65532" (not root)`},
		{"another entrypoint", func(c *v1.Config) { c.Entrypoint = []string{"/bin/sh"} }, `entrypoint ["/bin/sh"]`},
		{"no revision", func(c *v1.Config) { delete(c.Labels, LabelRevision) }, `label org.opencontainers.image.revision is "", want "` + rev + `"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := rewrite(t, out, c.change)
			_, err := Check(dir, CheckOptions{Revision: rev})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Check: %v\nwant an error containing %q", err, c.want)
			}
		})
	}
	cgo, _ := binaries(t, "CGO_ENABLED=1")
	_, _, err := Build(BuildOptions{RootFS: root, Binaries: map[string]string{"linux/amd64": cgo["linux/amd64"]}, Out: filepath.Join(t.TempDir(), "oci")})
	if err == nil || !strings.Contains(err.Error(), "it is not static") {
		t.Errorf("Build from a cgo binary: %v, want a refusal", err)
	}
}

// rewrite writes a copy of the layout in dir whose images' configs are
// changed by change.
func rewrite(t *testing.T, dir string, change func(*v1.Config)) string {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, _ := lp.ImageIndex()
	tm, _ := top.IndexManifest()
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	out := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		cf = cf.DeepCopy()
		change(&cf.Config)
		img, err = mutate.ConfigFile(img, cf)
		if err != nil {
			t.Fatal(err)
		}
		out = mutate.AppendManifests(out, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: m.Platform}})
	}
	to := filepath.Join(t.TempDir(), "oci")
	p, err := layout.Write(to, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(out, layout.WithAnnotations(tm.Manifests[0].Annotations)); err != nil {
		t.Fatal(err)
	}
	return to
}

// TestDockerfileDeclaresTheSame reads the final stage of the repository's
// Dockerfile and checks that it declares what Build puts in the config:
// the user, working directory, volume, port, environment, entrypoint,
// command, the binary's path and mode, the volume's owner, and the labels.
func TestDockerfileDeclaresTheSame(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Instructions, continuation lines joined, of the last stage.
	var stage []string
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur += s + " "
			continue
		}
		cur += line
		if strings.HasPrefix(cur, "FROM ") {
			stage = nil
		}
		stage = append(stage, cur)
		cur = ""
	}
	got := map[string][]string{}
	for _, ins := range stage {
		word, rest, _ := strings.Cut(ins, " ")
		got[word] = append(got[word], strings.TrimSpace(rest))
	}
	jsonArgs := func(word string) []string {
		var v []string
		if len(got[word]) != 1 || json.Unmarshal([]byte(got[word][0]), &v) != nil {
			t.Errorf("%s: %q, want one instruction in JSON form", word, got[word])
		}
		return v
	}
	if !slices.Equal(got["FROM"], []string{"scratch"}) {
		t.Errorf("the last stage is FROM %q, want scratch", got["FROM"])
	}
	if !slices.Equal(got["USER"], []string{User}) || !slices.Equal(got["WORKDIR"], []string{DataDir}) || !slices.Equal(got["EXPOSE"], []string{Port}) {
		t.Errorf("USER %q WORKDIR %q EXPOSE %q; want %s, %s, %s", got["USER"], got["WORKDIR"], got["EXPOSE"], User, DataDir, Port)
	}
	if v := jsonArgs("VOLUME"); !slices.Equal(v, []string{DataDir}) {
		t.Errorf("VOLUME %q, want [%s]", v, DataDir)
	}
	if v := jsonArgs("ENTRYPOINT"); !slices.Equal(v, Entrypoint) {
		t.Errorf("ENTRYPOINT %q, want %q", v, Entrypoint)
	}
	if v := jsonArgs("CMD"); !slices.Equal(v, Cmd) {
		t.Errorf("CMD %q, want %q", v, Cmd)
	}
	if !slices.Equal(got["ENV"], []string{strings.Join(Env, " ")}) {
		t.Errorf("ENV %q, want %q", got["ENV"], strings.Join(Env, " "))
	}
	copies := strings.Join(got["COPY"], "\n")
	for _, want := range []string{"--chmod=0755 /out/countersign " + BinaryPath, "--chown=65532:65532 --chmod=0700 /rootfs-data " + DataDir} {
		if !strings.Contains(copies, want) {
			t.Errorf("COPY lines:\n%s\nwant one with %q", copies, want)
		}
	}
	labels := strings.Join(got["LABEL"], " ")
	for _, want := range []string{LabelSource + `="` + Source + `"`, LabelRevision + "=", LabelVersion + "=", LabelCreated + "=", LabelTitle + "=", LabelDesc + "="} {
		if !strings.Contains(labels, want) {
			t.Errorf("LABEL %s\nwant %s", labels, want)
		}
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

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return string(b)
}
