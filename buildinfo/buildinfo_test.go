package buildinfo

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestRead reads what the go command stamps into a binary: the module
// version, the commit, its time, whether the tree was modified, the
// toolchain and the target; and falls back to Dev without it.
func TestRead(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/countersign/countersign", Version: "v0.0.0-20261201224327-4612eab55372"},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "GOOS", Value: "darwin"},
			{Key: "GOARCH", Value: "arm64"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "4612eab55372de543072f2a0c4407b063bf2e2d5"},
			{Key: "vcs.time", Value: "2026-12-01T22:43:27Z"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	dirty := *stamped
	dirty.Main.Version = "v0.1.0+dirty"
	dirty.Settings = append(append([]debug.BuildSetting(nil), stamped.Settings[:6]...), debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	here := runtime.GOOS + "/" + runtime.GOARCH
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want Facts
		out  []string // lines `version` prints
	}{
		{"a release build", stamped, true,
			Facts{Version: "v0.0.0-20261201224327-4612eab55372", Revision: "4612eab55372de543072f2a0c4407b063bf2e2d5", Time: "2026-12-01T22:43:27Z", Go: "go1.26.8", Platform: "darwin/arm64"},
			[]string{"countersign v0.0.0-20261201224327-4612eab55372", "  revision  4612eab55372de543072f2a0c4407b063bf2e2d5", "  time      2026-12-01T22:43:27Z (the commit's)", "  go        go1.26.8 darwin/arm64"}},
		{"uncommitted changes", &dirty, true,
			Facts{Version: "v0.1.0+dirty", Revision: "4612eab55372de543072f2a0c4407b063bf2e2d5", Time: "2026-12-01T22:43:27Z", Modified: true, Go: "go1.26.8", Platform: "darwin/arm64"},
			[]string{"countersign v0.1.0+dirty", "  revision  4612eab55372de543072f2a0c4407b063bf2e2d5 (modified: built with uncommitted changes)"}},
		{"go run: no VCS information", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/countersign/countersign", Version: "(devel)"}}, true,
			Facts{Version: "(devel)", Go: "go1.26.8", Platform: here},
			[]string{"countersign (devel)", "  revision  unknown (built without VCS information: go run, or outside a git clone; scripts/release builds carry it)"}},
		{"no build information at all", nil, false,
			Facts{Version: Dev, Go: runtime.Version(), Platform: here},
			[]string{"countersign (devel)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Read(func() (*debug.BuildInfo, bool) { return tt.bi, tt.ok })
			if got != tt.want {
				t.Errorf("Read:\n got %+v\nwant %+v", got, tt.want)
			}
			var out bytes.Buffer
			got.Write(&out)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			for _, want := range tt.out {
				found := false
				for _, l := range lines {
					found = found || l == want
				}
				if !found {
					t.Errorf("version printed:\n%s\nwant the line %q", out.String(), want)
				}
			}
		})
	}
}
