package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// floorKey is the bearer key of the floor server.
const floorKey = "cs_sk_floor_bench_key_0123456789"

// StartFloor builds the floor endpoint (cmd/floor, in this module) into dir
// and starts it; it returns once it listens.
func StartFloor(ctx context.Context, dir string) (*Server, error) {
	bin := filepath.Join(dir, "floor")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/floor")
	build.Dir = moduleDir()
	if b, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build floor: %v\n%s", err, b)
	}
	logPath := filepath.Join(dir, "floor.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s := &Server{Key: floorKey, log: logPath}
	s.cmd = exec.Command(bin)
	s.cmd.Env = append(os.Environ(), "FLOOR_KEY="+floorKey)
	s.cmd.Stderr, s.cmd.Stdout = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxIdleConns: 256, DisableCompression: true}}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if b, _ := os.ReadFile(logPath); listenRE.Match(b) {
			s.URL = "http://" + string(listenRE.FindSubmatch(b)[1])
			if err := s.Call("check_before_act", checkBody); err != nil {
				s.Stop()
				return nil, fmt.Errorf("floor: %w", err)
			}
			return s, nil
		}
	}
	s.Stop()
	return nil, fmt.Errorf("the floor did not start")
}

// moduleDir is the bench module's directory (benchrun runs from it).
func moduleDir() string {
	wd, _ := os.Getwd()
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "cmd", "floor", "main.go")); err == nil {
			return d
		}
		if _, err := os.Stat(filepath.Join(d, "bench", "cmd", "floor", "main.go")); err == nil {
			return filepath.Join(d, "bench")
		}
	}
	return wd
}

// RunFloor measures check_before_act on the countersign server gate and
// the floor side by side in one round: at one connection, call by call
// alternating (each on its own keep-alive connection); then at 32
// connections, in alternating halves of n calls each.
func RunFloor(res *Results, gate, floor *Server, n, n32 int) error {
	g1, f1 := &Sample{}, &Sample{}
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := gate.Call("check_before_act", checkBody); err != nil {
			return err
		}
		t1 := time.Now()
		if err := floor.Call("check_before_act", checkBody); err != nil {
			return err
		}
		g1.Add(t1.Sub(t0))
		f1.Add(time.Since(t1))
	}
	res.PutSample("F.gate1", g1)
	res.PutSample("F.floor1", f1)
	res.Put("F.ratio1.p50", g1.Quantile(0.5).Seconds()/f1.Quantile(0.5).Seconds())

	type acc struct {
		lat     Sample
		elapsed time.Duration
		n       int
	}
	var ga, fa acc
	run := func(s *Server, a *acc, total int) error {
		lat := make([]Sample, 32)
		t0 := time.Now()
		err := parallel(32, total, func(w, _ int) error {
			s0 := time.Now()
			err := s.Call("check_before_act", checkBody)
			lat[w].Add(time.Since(s0))
			return err
		})
		a.elapsed += time.Since(t0)
		a.n += total
		for i := range lat {
			a.lat.Merge(&lat[i])
		}
		return err
	}
	for half := 0; half < 2; half++ {
		if err := run(gate, &ga, n32/2); err != nil {
			return err
		}
		if err := run(floor, &fa, n32/2); err != nil {
			return err
		}
	}
	res.PutSample("F.gate32", &ga.lat)
	res.PutSample("F.floor32", &fa.lat)
	gr, fr := float64(ga.n)/ga.elapsed.Seconds(), float64(fa.n)/fa.elapsed.Seconds()
	res.Put("F.gate32.rate", gr)
	res.Put("F.floor32.rate", fr)
	res.Put("F.ratio32.rate", gr/fr)
	res.Put("F.ratio32.p99", ga.lat.Quantile(0.99).Seconds()/fa.lat.Quantile(0.99).Seconds())
	return nil
}
