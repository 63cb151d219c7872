package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/countersign/countersign/buildinfo"
)

// version is the release: the module version the go command stamps into
// the binary from the git clone it builds in (the tag on the commit, else a
// pseudo-version naming the commit), or buildinfo.Dev. The MCP handshake and
// `countersign version` report it.
var version = buildinfo.Read(debug.ReadBuildInfo).Version

// cmdVersion runs `countersign version`.
func cmdVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", stderr)
	short := fs.Bool("short", false, "print only the version")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f := buildinfo.Read(debug.ReadBuildInfo)
	if *short {
		fmt.Fprintln(stdout, f.Version)
		return nil
	}
	f.Write(stdout)
	return nil
}
