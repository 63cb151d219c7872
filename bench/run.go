package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Plan sizes a run. Full is the documented run; Tiny keeps the harness from
// rotting in CI (every scenario, small numbers, one round).
type Plan struct {
	Rounds       int
	GateOps      int // G1 decisions per engine per round
	GateCalls    int // G1 durable tool calls per round
	HTTPOps      int // G2 calls per round
	G3Ops        int
	G4Window     time.Duration
	G4Pending    int
	W1Ops        int
	W2Ops        int
	SpaceFacts   int // R1: facts in one space
	RecallOps    int
	Agents       int // R1/M1: agents × PerAgent facts
	PerAgent     int
	SweepPending int // S1
	FloorOps     int // F: calls at one connection, to each of the gate and the floor
	Floor32Ops   int // F: calls at 32 connections, to each
}

// Full is the documented plan (about 10 minutes on 2 cores).
var Full = Plan{
	Rounds: 5, GateOps: 20000, GateCalls: 1000, HTTPOps: 5000, G3Ops: 64000,
	G4Window: 8 * time.Second, G4Pending: 5000, W1Ops: 1000, W2Ops: 20000,
	SpaceFacts: 10000, RecallOps: 500, Agents: 10000, PerAgent: 100, SweepPending: 100000,
	FloorOps: 5000, Floor32Ops: 64000,
}

// Tiny runs every scenario once on small numbers.
var Tiny = Plan{
	Rounds: 1, GateOps: 500, GateCalls: 50, HTTPOps: 200, G3Ops: 640,
	G4Window: time.Second, G4Pending: 100, W1Ops: 100, W2Ops: 640,
	SpaceFacts: 500, RecallOps: 50, Agents: 100, PerAgent: 20, SweepPending: 1000,
	FloorOps: 200, Floor32Ops: 640,
}

// Options of a run.
type Options struct {
	Plan Plan
	Dir  string    // where stores live: the disk under test
	Root string    // the countersign module (for building the binary)
	Log  io.Writer // progress
	// Only, when not empty, runs just these scenarios: G1, G2, G3, G4, W1,
	// W2, R1 (one big space), S1, M1 (the million facts: load, R1 of one
	// agent, the server's start-up and memory), F (the gate beside the
	// floor, the cheapest Go JSON endpoint).
	Only []string
}

// selected reports whether scenario id runs under o.Only.
func (o Options) selected(id string) bool {
	if len(o.Only) == 0 {
		return true
	}
	for _, s := range o.Only {
		if strings.EqualFold(strings.TrimSpace(s), id) {
			return true
		}
	}
	return false
}

// Scenarios are the ids Options.Only accepts.
var Scenarios = []string{"G1", "G2", "G3", "G4", "F", "W1", "W2", "R1", "S1", "M1"}

// Run runs every scenario and returns the machine and results.
func Run(ctx context.Context, o Options) (Machine, *Results, error) {
	p := o.Plan
	res := NewResults()
	logf := func(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }
	m, err := Describe(o.Dir, 2000)
	if err != nil {
		return m, nil, fmt.Errorf("machine: %w", err)
	}
	logf("machine: %d cores, %.1f GiB, %s; fsync p50 %s, %.0f/s", m.Cores, m.MemoryGiB, m.Go, m.FsyncP50, m.FsyncRate)
	bin := filepath.Join(o.Dir, "countersign")
	logf("building %s", bin)
	if err := BuildBinary(ctx, o.Root, bin); err != nil {
		return m, nil, err
	}
	round := func(name string, fn func(r int) error) error {
		for r := 0; r < p.Rounds; r++ {
			t0 := time.Now()
			if err := fn(r); err != nil {
				return fmt.Errorf("%s round %d: %w", name, r+1, err)
			}
			logf("%s round %d/%d: %s", name, r+1, p.Rounds, time.Since(t0).Round(time.Millisecond))
		}
		return nil
	}
	skip := func(id string, fn func() error) error {
		if !o.selected(id) {
			return nil
		}
		return fn()
	}

	// G1: in process, beside OPA.
	if o.selected("G1") {
		env, err := NewEnv(filepath.Join(o.Dir, "g1.db"), EnvOptions{})
		if err != nil {
			return m, nil, err
		}
		gate, err := NewGate(ctx, env)
		if err == nil {
			err = round("G1", func(int) error { return gate.RunG1(ctx, res, p.GateOps, p.GateCalls) })
		}
		env.Close()
		if err != nil {
			return m, nil, err
		}
	}

	// G2, G3: the real binary over loopback; F: the same beside the floor.
	if o.selected("G2") || o.selected("G3") || o.selected("F") {
		srv, err := StartServer(ctx, bin, o.Dir, filepath.Join(o.Dir, "g2.db"), time.Minute, "")
		if err != nil {
			return m, nil, err
		}
		err = srv.seedGate()
		if err == nil && o.selected("G2") {
			err = round("G2", func(int) error { return srv.RunG2(res, "G2", p.HTTPOps) })
		}
		if err == nil && o.selected("G3") {
			err = round("G3", func(int) error { return srv.RunG3(res, 32, p.G3Ops) })
		}
		if err == nil && o.selected("F") {
			var floor *Server
			if floor, err = StartFloor(ctx, o.Dir); err == nil {
				err = round("F", func(int) error { return RunFloor(res, srv, floor, p.FloorOps, p.Floor32Ops) })
				floor.Stop()
			}
		}
		srv.Stop()
		if err != nil {
			return m, nil, err
		}
	}

	// G4: a fresh server per round, so each window has requests to expire.
	err = skip("G4", func() error {
		return round("G4", func(r int) error {
			s, err := StartServer(ctx, bin, o.Dir, filepath.Join(o.Dir, fmt.Sprintf("g4-%d.db", r)), 5*time.Second, "")
			if err != nil {
				return err
			}
			defer s.Stop()
			if err := s.seedGate(); err != nil {
				return err
			}
			if err := s.RunG2(res, "G4.idle", p.HTTPOps/2); err != nil {
				return err
			}
			return s.RunG4(res, p.G4Window, 1000, p.G4Pending)
		})
	})
	if err != nil {
		return m, nil, err
	}

	if err := skip("W1", func() error { return round("W1", func(r int) error { return RunW1(ctx, o.Dir, res, r, p.W1Ops) }) }); err != nil {
		return m, nil, err
	}
	if err := skip("W2", func() error { return round("W2", func(r int) error { return RunW2(ctx, o.Dir, res, r, p.W2Ops, 64) }) }); err != nil {
		return m, nil, err
	}

	if o.selected("R1") {
		logf("R1: filling one space with %d facts", p.SpaceFacts)
		big, err := NewBigSpace(ctx, o.Dir, p.SpaceFacts)
		if err != nil {
			return m, nil, err
		}
		err = round("R1 space", func(int) error { return big.Run(ctx, res, "R1.space", p.RecallOps) })
		big.Close()
		if err != nil {
			return m, nil, err
		}
	}

	if err := skip("S1", func() error {
		return round("S1", func(r int) error { return RunS1(ctx, o.Dir, res, r, p.SweepPending) })
	}); err != nil {
		return m, nil, err
	}

	if !o.selected("M1") {
		return m, res, nil
	}
	logf("M1: loading %d agents × %d facts through remember", p.Agents, p.PerAgent)
	mil, err := BuildMillion(ctx, o.Dir, p.Agents, p.PerAgent, res)
	if err != nil {
		return m, nil, err
	}
	logf("M1: loaded in %s", mil.Load.Round(time.Second))
	if err := round("R1 agent", func(r int) error { return mil.Run(ctx, res, p.RecallOps, r == 0) }); err != nil {
		return m, nil, err
	}
	if err := round("M1 server", func(int) error { return RunM1Server(ctx, bin, o.Dir, mil, res, p.RecallOps) }); err != nil {
		return m, nil, err
	}
	return m, res, nil
}

// TempDir makes a directory for a run under base (the disk under test).
func TempDir(base string) (string, error) {
	if base == "" {
		base = os.TempDir()
	}
	return os.MkdirTemp(base, "countersign-bench-")
}
