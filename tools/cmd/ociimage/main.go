// Command ociimage builds and checks Countersign's OCI image layout
// (package image says what the image is).
//
// Usage:
//
//	ociimage build -rootfs DIR -binary linux/amd64=FILE -binary linux/arm64=FILE [-packages TEXT] OUTDIR
//	ociimage check -revision COMMIT [-extract FILE] [-platform linux/amd64] DIR
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/countersign/countersign/tools/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  ociimage build -rootfs DIR -binary linux/amd64=FILE -binary linux/arm64=FILE [-packages TEXT] OUTDIR
  ociimage check -revision COMMIT [-extract FILE] [-platform linux/amd64] DIR`

func run(args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "build":
		return build(args[1:])
	case "check":
		return check(args[1:])
	}
	return errors.New(usage)
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	o := image.BuildOptions{Binaries: map[string]string{}}
	fs.StringVar(&o.RootFS, "rootfs", "", "the root file system (deploy/image/rootfs writes it)")
	fs.StringVar(&o.Packages, "packages", "", "the Debian packages its files come from, with their versions")
	fs.Func("binary", "PLATFORM=FILE: the static binary of a platform (repeat)", func(v string) error {
		p, f, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("%q is not PLATFORM=FILE", v)
		}
		o.Binaries[p] = f
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || o.RootFS == "" {
		return errors.New(usage)
	}
	o.Out = fs.Arg(0)
	v, r, err := image.Build(o)
	if err != nil {
		return err
	}
	fmt.Printf("image: countersign %s (%s) for %d platforms in %s\n", v, r, len(o.Binaries), o.Out)
	return nil
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	var o image.CheckOptions
	fs.StringVar(&o.Revision, "revision", "", "the commit the image must be built from (required)")
	fs.StringVar(&o.Extract, "extract", "", "write the binary of -platform, taken out of its layer, to this new file")
	fs.StringVar(&o.ExtractPlatform, "platform", runtime.GOOS+"/"+runtime.GOARCH, "the platform whose binary -extract takes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || o.Revision == "" {
		return errors.New(usage)
	}
	imgs, err := image.Check(fs.Arg(0), o)
	if err != nil {
		return err
	}
	for _, c := range imgs {
		fmt.Printf("ok %s %s: %d layers, %d CA certificates, %d zone files\n", c.Platform, c.Digest, c.Layers, c.Certs, c.Zones)
	}
	if o.Extract != "" {
		fmt.Printf("ok the %s binary is at %s\n", o.ExtractPlatform, o.Extract)
	}
	return nil
}
