// Package buildinfo reads what the go command stamps into a binary (the
// module version, the commit and its time, whether the tree was modified,
// the toolchain and the target) and prints it as `countersign version`
// does.
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Dev is the version of a build that carries no module version: go
// run, go test, or a build outside a git clone.
const Dev = "(devel)"

// Facts is what a binary knows about its own build.
type Facts struct {
	Version  string // the module version, or Dev
	Revision string // the commit it was built from; "" without VCS information
	Time     string // the commit's time (RFC 3339); "" without VCS information
	Modified bool   // the work tree had uncommitted changes
	Go       string // the Go toolchain, e.g. go1.26.8
	Platform string // GOOS/GOARCH
}

// Read reads the build information the go command embeds in every
// binary (read is debug.ReadBuildInfo, or a stand-in in tests).
func Read(read func() (*debug.BuildInfo, bool)) Facts {
	f := Facts{Version: Dev, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := read()
	if !ok || bi == nil {
		return f
	}
	if v := bi.Main.Version; v != "" {
		f.Version = v
	}
	if bi.GoVersion != "" {
		f.Go = bi.GoVersion
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			f.Revision = s.Value
		case "vcs.time":
			f.Time = s.Value
		case "vcs.modified":
			f.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		f.Platform = goos + "/" + goarch
	}
	return f
}

// Write prints the facts as `countersign version` shows them.
func (f Facts) Write(w io.Writer) {
	fmt.Fprintf(w, "countersign %s\n", f.Version)
	if f.Revision == "" {
		fmt.Fprintln(w, "  revision  unknown (built without VCS information: go run, or outside a git clone; scripts/release builds carry it)")
	} else {
		rev := f.Revision
		if f.Modified {
			rev += " (modified: built with uncommitted changes)"
		}
		fmt.Fprintf(w, "  revision  %s\n", rev)
		// The commit's time, not the clock's at build: two builds of one
		// commit are byte for byte the same (scripts/release).
		fmt.Fprintf(w, "  time      %s (the commit's)\n", f.Time)
	}
	fmt.Fprintf(w, "  go        %s %s\n", f.Go, f.Platform)
}
