// Package image builds Countersign's container image as an OCI image
// layout on disk, without a daemon or a registry (go-containerregistry),
// and checks one: what scripts/image writes and .ci/run checks.
//
// The image is an index of one image per platform (linux/amd64,
// linux/arm64), each of two layers: the files of the root file system
// (CA certificates and time zone data from Debian's packages, the user
// and group, the /data volume's directory), shared by both, and the static
// binary. Everything is taken from its inputs and the commit: the layers'
// times and the config's are the commit's time, owners are fixed, entries
// sorted, so that one commit and one set of inputs give the same bytes.
package image

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What every Countersign image is; the Dockerfile declares the same
// (TestDockerfileDeclaresTheSame).
const (
	// UID and GID run the server: not root, and no name in a host's
	// passwd (the distroless "nonroot" ids).
	UID, GID = 65532, 65532
	// User is the config's user, numeric so that Kubernetes can check
	// runAsNonRoot without reading /etc/passwd.
	User = "65532:65532"
	// BinaryPath is where the binary is, owned by root and not writable
	// by the user.
	BinaryPath = "/usr/local/bin/countersign"
	// DataDir is the volume: the working directory, where the embedded
	// default config keeps the store and its signing key.
	DataDir = "/data"
	// Port is the port serve listens on (ListenEnv).
	Port = "8080/tcp"
	// ListenEnv makes serve listen on every address of the container:
	// the default config's 127.0.0.1 is unreachable from outside it.
	ListenEnv = "COUNTERSIGN_LISTEN=:8080"
	// Source is the repository the labels name.
	Source = "https://github.com/countersign/countersign"
	// MainPackage is the command every binary must be.
	MainPackage = "github.com/countersign/countersign/cmd/countersign"
)

// Entrypoint and Cmd: `docker run IMAGE` serves; `docker run IMAGE
// version` (or any other command) runs that command instead.
var (
	Entrypoint = []string{BinaryPath}
	Cmd        = []string{"serve"}
	Env        = []string{"PATH=/usr/local/bin", ListenEnv}
)

// Platforms are the platforms of the image.
var Platforms = []string{"linux/amd64", "linux/arm64"}

// Label names (the OCI annotations; as labels in each config, and as
// annotations on each manifest and the index).
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	LabelDesc     = "org.opencontainers.image.description"
	// RefName names the image in the layout's index.json (its version).
	RefName = "org.opencontainers.image.ref.name"
)

// BuildOptions are the inputs of Build.
type BuildOptions struct {
	// RootFS is a directory of the files of the root file system (written
	// by deploy/image/rootfs); its data/ becomes DataDir.
	RootFS string
	// Binaries maps each platform (GOOS/GOARCH) to its static binary.
	Binaries map[string]string
	// Packages says where RootFS's files come from (for the layer's
	// history), e.g. "ca-certificates 20230311+deb12u1, tzdata 2025b-0+deb12u2".
	Packages string
	// Out is the directory of the OCI layout; it must not exist or be empty.
	Out string
}

// Build writes the image layout of o.Out and returns the version and the
// revision of its binaries, which must agree.
func Build(o BuildOptions) (version, revision string, err error) {
	if len(o.Binaries) == 0 {
		return "", "", errors.New("image: no binaries")
	}
	if entries, err := os.ReadDir(o.Out); err == nil && len(entries) > 0 {
		return "", "", fmt.Errorf("image: %s is not empty", o.Out)
	}
	var created time.Time
	platforms := sortedKeys(o.Binaries)
	for _, p := range platforms {
		v, r, t, err := readBinary(o.Binaries[p], p)
		if err != nil {
			return "", "", fmt.Errorf("image: %s: %w", o.Binaries[p], err)
		}
		if version != "" && (v != version || r != revision) {
			return "", "", fmt.Errorf("image: the binaries disagree: %s@%s and %s@%s", version, revision, v, r)
		}
		version, revision, created = v, r, t
	}
	labels := map[string]string{
		LabelSource:   Source,
		LabelRevision: revision,
		LabelVersion:  version,
		LabelCreated:  created.UTC().Format(time.RFC3339),
		LabelTitle:    "countersign",
		LabelDesc:     "A chat-ops approval bot for AI agents",
	}
	base, err := rootLayer(o.RootFS, created)
	if err != nil {
		return "", "", err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		bin, err := binaryLayer(o.Binaries[p], created)
		if err != nil {
			return "", "", err
		}
		img, err := platformImage(p, base, bin, created, labels, o.Packages)
		if err != nil {
			return "", "", err
		}
		goos, goarch, _ := strings.Cut(p, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}}})
	}
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	lp, err := layout.Write(o.Out, empty.Index)
	if err != nil {
		return "", "", fmt.Errorf("image: %w", err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefName: version})); err != nil {
		return "", "", fmt.Errorf("image: %w", err)
	}
	return version, revision, nil
}

// readBinary reads the build information of a release binary: built for
// platform, static, from a clean commit; it returns the module version,
// the commit and the commit's time.
func readBinary(path, platform string) (version, revision string, created time.Time, err error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("no Go build information: %w", err)
	}
	s := map[string]string{}
	for _, b := range bi.Settings {
		s[b.Key] = b.Value
	}
	goos, goarch, _ := strings.Cut(platform, "/")
	switch {
	case bi.Path != MainPackage:
		return "", "", time.Time{}, fmt.Errorf("it is %s, not %s", bi.Path, MainPackage)
	case s["GOOS"] != goos || s["GOARCH"] != goarch:
		return "", "", time.Time{}, fmt.Errorf("it is built for %s/%s, not %s", s["GOOS"], s["GOARCH"], platform)
	case s["CGO_ENABLED"] != "0":
		return "", "", time.Time{}, errors.New("it is not static (CGO_ENABLED is not 0): the image has no C library")
	case s["vcs.revision"] == "" || s["vcs.modified"] != "false":
		return "", "", time.Time{}, errors.New("it was not built from a clean commit (scripts/release builds one)")
	}
	created, err = time.Parse(time.RFC3339, s["vcs.time"])
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("vcs.time: %w", err)
	}
	return bi.Main.Version, s["vcs.revision"], created, nil
}

// platformImage is the image of one platform: the two layers and the
// config.
func platformImage(platform string, base, bin v1.Layer, created time.Time, labels map[string]string, packages string) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	when := v1.Time{Time: created}
	from := "the root file system"
	if packages != "" {
		from += ": " + packages + " (Debian, checked against dpkg's sums), the countersign user and group, /data"
	}
	img, err := mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: when, CreatedBy: from}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: when, CreatedBy: "countersign " + labels[LabelVersion] + " (" + labels[LabelRevision] + "), static, -trimpath"}},
	)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	goos, goarch, _ := strings.Cut(platform, "/")
	cf.OS, cf.Architecture, cf.Created = goos, goarch, when
	cf.Config = v1.Config{
		User:         User,
		Entrypoint:   Entrypoint,
		Cmd:          Cmd,
		Env:          Env,
		WorkingDir:   DataDir,
		Volumes:      map[string]struct{}{DataDir: {}},
		ExposedPorts: map[string]struct{}{Port: {}},
		Labels:       labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// rootLayer makes the layer of the root file system from dir: every file,
// directory and symlink under it, owned by root, except data/ (DataDir),
// which belongs to the user with mode 0700.
func rootLayer(dir string, created time.Time) (v1.Layer, error) {
	var entries []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{name: rel, mode: 0o644}
		switch {
		case d.IsDir():
			e.typ, e.mode = tar.TypeDir, 0o755
			if rel == "data" {
				e.mode, e.uid, e.gid = 0o700, UID, GID
			}
		case info.Mode()&fs.ModeSymlink != 0:
			if e.link, err = os.Readlink(path); err != nil {
				return err
			}
			e.typ, e.mode = tar.TypeSymlink, 0o777
		case info.Mode().IsRegular():
			e.typ, e.path = tar.TypeReg, path
			if info.Mode()&0o111 != 0 {
				e.mode = 0o755
			}
		default:
			return fmt.Errorf("image: %s is neither a file, a directory nor a symlink", path)
		}
		if strings.HasPrefix(rel, "data/") {
			return fmt.Errorf("image: %s: the volume's directory must be empty in the image", path)
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("image: the root file system: %w", err)
	}
	for _, want := range []string{"etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", "usr/share/zoneinfo/UTC", "data"} {
		if !hasEntry(entries, want) {
			return nil, fmt.Errorf("image: the root file system %s has no %s (deploy/image/rootfs writes it)", dir, want)
		}
	}
	return layerOf(entries, created)
}

// binaryLayer makes the layer of the binary at path: BinaryPath, mode 0755,
// owned by root, with its parent directories.
func binaryLayer(path string, created time.Time) (v1.Layer, error) {
	rel := strings.TrimPrefix(BinaryPath, "/")
	var entries []entry
	for d := filepath.ToSlash(filepath.Dir(rel)); d != "."; d = filepath.ToSlash(filepath.Dir(d)) {
		entries = append(entries, entry{name: d, typ: tar.TypeDir, mode: 0o755})
	}
	entries = append(entries, entry{name: rel, typ: tar.TypeReg, mode: 0o755, path: path})
	return layerOf(entries, created)
}

// entry is one entry of a layer's tar.
type entry struct {
	name     string // relative, slash-separated
	typ      byte
	mode     int64
	uid, gid int
	link     string // a symlink's target
	path     string // a regular file's content
}

func hasEntry(entries []entry, name string) bool {
	for _, e := range entries {
		if e.name == name {
			return true
		}
	}
	return false
}

// layerOf writes entries, sorted by name, as a tar with fixed times and
// owners, and makes a gzip-compressed OCI layer of it.
func layerOf(entries []entry, created time.Time) (v1.Layer, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Typeflag: e.typ, Name: e.name, Linkname: e.link, Mode: e.mode,
			Uid: e.uid, Gid: e.gid, ModTime: created,
		}
		if e.typ == tar.TypeDir {
			h.Name += "/"
		}
		var content []byte
		if e.typ == tar.TypeReg {
			var err error
			if content, err = os.ReadFile(e.path); err != nil {
				return nil, fmt.Errorf("image: %w", err)
			}
			h.Size = int64(len(content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: %s: %w", e.name, err)
		}
		if _, err := tw.Write(content); err != nil {
			return nil, fmt.Errorf("image: %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
