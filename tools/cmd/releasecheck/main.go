// Command releasecheck checks a release directory written by
// scripts/release (package release says what it checks), then runs the
// binary built for this machine, if the release has one, and checks that
// `countersign version` prints the commit.
//
// Usage:
//
//	releasecheck -revision COMMIT [-targets "linux/amd64 ..."] DIR
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/countersign/countersign/tools/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "releasecheck:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("releasecheck", flag.ContinueOnError)
	revision := fs.String("revision", "", "the commit every binary must be built from (required)")
	targets := fs.String("targets", "", "the GOOS/GOARCH targets the release must hold, separated by spaces (default: all six)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *revision == "" {
		return errors.New("usage: releasecheck -revision COMMIT [-targets \"linux/amd64 ...\"] DIR")
	}
	dir := fs.Arg(0)
	o := release.Options{Revision: *revision}
	if *targets != "" {
		o.Targets = strings.Fields(*targets)
	}
	rep, err := release.Check(dir, o)
	if err != nil {
		return err
	}
	for _, b := range rep.Binaries {
		fmt.Printf("ok %-34s %s %s, %d modules in its SBOM\n", b.Name, b.Version, b.SHA256[:12], b.Modules)
	}
	host := release.BinaryName(runtime.GOOS + "/" + runtime.GOARCH)
	if _, err := os.Stat(filepath.Join(dir, host)); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, filepath.Join(dir, host), "version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s version: %v\n%s", host, err, out)
		}
		if !bytes.Contains(out, []byte("\n  revision  "+*revision+"\n")) {
			return fmt.Errorf("%s version printed:\n%s\nwant the line \"  revision  %s\"", host, out, *revision)
		}
		fmt.Printf("ok %s version prints revision %s\n", host, *revision)
	}
	fmt.Printf("release ok: %d files in %s, every sum matches\n", rep.Files, release.SumsFile)
	return nil
}
