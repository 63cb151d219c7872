package image

import (
	"archive/tar"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// CheckOptions say what Check expects.
type CheckOptions struct {
	// Revision is the commit the image must be built from.
	Revision string
	// Extract, when set, receives the binary of ExtractPlatform taken out
	// of its layer (mode 0755), to run.
	Extract         string
	ExtractPlatform string
}

// Checked is what Check found about one platform's image.
type Checked struct {
	Platform string
	Digest   string
	Layers   int
	Certs    int // certificates in the CA bundle
	Zones    int // files under usr/share/zoneinfo
}

// Check reads the OCI layout in dir and checks every image in it: an index
// naming its version, one image per platform of Platforms, each with the
// config Countersign's image has (user, entrypoint, command, environment,
// working directory, volume, port, labels with the commit), and layers that
// hold the static binary owned by root, a CA bundle of PEM certificates,
// time zone data that loads, the user in /etc/passwd, /data owned by the
// user with mode 0700, and no other file the user owns or any setuid bit.
// It reports every problem it finds.
func Check(dir string, o CheckOptions) ([]Checked, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image: %s is not an OCI layout: %w", dir, err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, fmt.Errorf("image: index.json should name one image index, it names %d entries", len(tm.Manifests))
	}
	desc := tm.Manifests[0]
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	version := desc.Annotations[RefName]
	if version == "" {
		add("index.json: the index has no %s", RefName)
	}
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	var found []string
	var out []Checked
	for _, m := range im.Manifests {
		if m.Platform == nil {
			add("a manifest %s has no platform", m.Digest)
			continue
		}
		p := m.Platform.OS + "/" + m.Platform.Architecture
		found = append(found, p)
		img, err := idx.Image(m.Digest)
		if err != nil {
			add("%s: %v", p, err)
			continue
		}
		c, ps := checkImage(img, p, version, o)
		for _, pr := range ps {
			add("%s: %s", p, pr)
		}
		c.Digest = m.Digest.String()
		out = append(out, c)
	}
	slices.Sort(found)
	if want := slices.Sorted(slices.Values(Platforms)); !slices.Equal(found, want) {
		add("the index holds the platforms %v, want %v", found, want)
	}
	if o.Extract != "" && !slices.Contains(found, o.ExtractPlatform) {
		add("no image for %s to take the binary from", o.ExtractPlatform)
	}
	if len(problems) > 0 {
		return out, errors.New("image: " + strings.Join(problems, "\n  "))
	}
	return out, nil
}

// checkImage checks one platform's image.
func checkImage(img v1.Image, platform, version string, o CheckOptions) (Checked, []string) {
	c := Checked{Platform: platform}
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		add("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return c, []string{err.Error()}
	}
	goos, goarch, _ := strings.Cut(platform, "/")
	if cf.OS != goos || cf.Architecture != goarch {
		add("config says %s/%s", cf.OS, cf.Architecture)
	}
	cc := cf.Config
	if cc.User != User {
		add("user %q, want %q (not root)", cc.User, User)
	}
	if !slices.Equal(cc.Entrypoint, Entrypoint) || !slices.Equal(cc.Cmd, Cmd) {
		add("entrypoint %q and cmd %q, want %q and %q", cc.Entrypoint, cc.Cmd, Entrypoint, Cmd)
	}
	if !slices.Equal(cc.Env, Env) {
		add("env %q, want %q", cc.Env, Env)
	}
	if cc.WorkingDir != DataDir {
		add("working directory %q, want %q", cc.WorkingDir, DataDir)
	}
	if _, ok := cc.Volumes[DataDir]; !ok || len(cc.Volumes) != 1 {
		add("volumes %v, want only %s", cc.Volumes, DataDir)
	}
	if _, ok := cc.ExposedPorts[Port]; !ok {
		add("exposed ports %v, want %s", cc.ExposedPorts, Port)
	}
	want := map[string]string{LabelSource: Source, LabelVersion: version}
	if o.Revision != "" {
		want[LabelRevision] = o.Revision
	}
	for k, v := range want {
		if cc.Labels[k] != v {
			add("label %s is %q, want %q", k, cc.Labels[k], v)
		}
	}
	if ts, err := time.Parse(time.RFC3339, cc.Labels[LabelCreated]); err != nil || !ts.Equal(cf.Created.Time) {
		add("label %s %q is not the config's created time %s", LabelCreated, cc.Labels[LabelCreated], cf.Created.Time)
	}
	layers, err := img.Layers()
	if err != nil {
		return c, append(problems, err.Error())
	}
	c.Layers = len(layers)
	files := map[string]*tar.Header{}
	var extracted bool
	for i, l := range layers {
		if mt, _ := l.MediaType(); mt != types.OCILayer {
			add("layer %d: media type %s, want %s", i, mt, types.OCILayer)
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return c, append(problems, err.Error())
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				add("layer %d: %v", i, err)
				break
			}
			name := path.Clean("/" + h.Name)
			files[name] = h
			if h.Mode&0o6000 != 0 {
				add("%s is setuid or setgid", name)
			}
			if (h.Uid != 0 || h.Gid != 0) && name != DataDir {
				add("%s is owned by %d:%d; only %s may belong to the user", name, h.Uid, h.Gid, DataDir)
			}
			switch {
			case name == "/etc/ssl/certs/ca-certificates.crt":
				c.Certs = countPEM(tr)
			case strings.HasPrefix(name, "/usr/share/zoneinfo/") && h.Typeflag == tar.TypeReg:
				c.Zones++
				if name == "/usr/share/zoneinfo/Europe/Berlin" {
					b, _ := io.ReadAll(tr)
					if _, err := time.LoadLocationFromTZData("Europe/Berlin", b); err != nil {
						add("%s does not load: %v", name, err)
					}
				}
			case name == "/etc/passwd":
				b, _ := io.ReadAll(tr)
				if !strings.Contains(string(b), fmt.Sprintf("\ncountersign:x:%d:%d:", UID, GID)) {
					add("/etc/passwd has no countersign user %d:%d", UID, GID)
				}
			case name == BinaryPath && o.Extract != "" && platform == o.ExtractPlatform:
				if err := writeExec(o.Extract, tr); err != nil {
					add("taking the binary out: %v", err)
				}
				extracted = true
			}
		}
		rc.Close()
	}
	if h := files[BinaryPath]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
		add("%s: %v, want a file of mode 0755", BinaryPath, h)
	}
	if h := files[DataDir]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o700 || h.Uid != UID || h.Gid != GID {
		add("%s: %v, want a directory of mode 0700 owned by %s", DataDir, h, User)
	}
	if c.Certs < 100 {
		add("the CA bundle holds %d certificates, want Debian's (over 100)", c.Certs)
	}
	if files["/usr/share/zoneinfo/Europe/Berlin"] == nil || files["/usr/share/zoneinfo/UTC"] == nil {
		add("no time zone data (usr/share/zoneinfo/UTC, Europe/Berlin)")
	}
	if files["/etc/group"] == nil {
		add("no /etc/group")
	}
	if o.Extract != "" && platform == o.ExtractPlatform && !extracted {
		add("no binary to take out")
	}
	return c, problems
}

// countPEM counts the certificates in a PEM bundle.
func countPEM(r io.Reader) int {
	b, _ := io.ReadAll(r)
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return n
		}
		if blk.Type == "CERTIFICATE" {
			n++
		}
	}
}

// writeExec writes r to the new executable file at p.
func writeExec(p string, r io.Reader) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
