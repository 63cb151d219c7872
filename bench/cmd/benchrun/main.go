// Command benchrun runs Countersign's benchmarks against the targets of
// shared/reference/perf-targets.md and writes the table into BENCHMARKS.md.
//
// From the bench directory:
//
//	go run ./cmd/benchrun              # the full run (about 10 minutes on 2 cores)
//	go run ./cmd/benchrun -tiny -out /tmp/b.md   # every scenario on small numbers
//	go run ./cmd/benchrun -only G2,G3 -rounds 1  # some scenarios; printed, BENCHMARKS.md untouched
//
// Stores go in a fresh directory under -dir (default: the system temp dir),
// whose disk is the one measured; it is removed afterwards unless -keep.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

func run() error {
	tiny := flag.Bool("tiny", false, "every scenario once on small numbers (CI's smoke run)")
	rounds := flag.Int("rounds", 0, "rounds per scenario (default: 5, or 1 with -tiny)")
	dir := flag.String("dir", "", "directory for the stores, on the disk to measure (default: the system temp dir)")
	out := flag.String("out", "../BENCHMARKS.md", "the report to write the table into")
	root := flag.String("root", "..", "the countersign module, to build the binary from")
	keep := flag.Bool("keep", false, "keep the stores afterwards")
	only := flag.String("only", "", "comma-separated scenarios to run ("+strings.Join(bench.Scenarios, ", ")+"); the report is then printed, and written only to an explicit -out")
	flag.Parse()
	if os.Getenv("GOGC") == "" {
		// The in-process scenarios (G1, W1, W2, R1, S1) run the server's
		// code in this process: with the collector of `countersign serve`,
		// which sets GOGC=400 unless GOGC is in its environment.
		debug.SetGCPercent(400)
	}
	var sel []string
	if *only != "" {
		sel = strings.Split(*only, ",")
		for _, s := range sel {
			if !slices.ContainsFunc(bench.Scenarios, func(id string) bool { return strings.EqualFold(id, strings.TrimSpace(s)) }) {
				return fmt.Errorf("-only: unknown scenario %q (want some of %s)", s, strings.Join(bench.Scenarios, ", "))
			}
		}
		outSet := false
		flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
		if !outSet {
			*out = "" // a partial run never overwrites BENCHMARKS.md by default
		}
	}
	p := bench.Full
	if *tiny {
		p = bench.Tiny
	}
	if *rounds > 0 {
		p.Rounds = *rounds
	}
	root2, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	work, err := bench.TempDir(*dir)
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(work)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	t0 := time.Now()
	m, res, err := bench.Run(ctx, bench.Options{Plan: p, Dir: work, Root: root2, Log: os.Stderr, Only: sel})
	if err != nil {
		return err
	}
	command := "cd bench && go run ./cmd/benchrun"
	if len(os.Args) > 1 {
		command += " " + strings.Join(os.Args[1:], " ")
	}
	block := bench.Report(m, res, p, command, time.Since(t0))
	fmt.Print(block)
	if *out != "" {
		if err := bench.WriteReport(*out, block); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", *out)
	}
	return nil
}
