//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// floorRounds is how many times each pair of blocks (floor, then tool) is
// run; the figures reported are medians over the rounds.
const floorRounds = 7

// BenchmarkPostgresFloors is BENCHMARKS.md's PostgreSQL ratios: each tool
// call of the whole server (run serve, in process, over loopback HTTP)
// beside its floor on the same PostgreSQL (fsync on), floorRounds rounds
// of b.N calls each (one writer or client: floor and tool call by call
// alternating; many: a block of each): remember against a bare pgx
// INSERT of a 300-byte row (one statement, its own transaction) at 1 and
// 64 writers, check_before_act against a bare pgx SELECT by primary key at
// 1 and 32 clients. Reported: the medians of the rounds' p50 per call (1
// writer or client) or wall time per call (many), and of the rounds'
// ratios tool/floor.
//
//	go test -run '^$' -bench PostgresFloors -benchtime 400x ./cmd/countersign
func BenchmarkPostgresFloors(b *testing.B) {
	c, err := pgtest.Start(pgtest.Options{Fsync: true})
	if err != nil {
		pgtest.Unavailable(b, err)
	}
	defer c.Remove()
	ctx := context.Background()
	dsn, err := c.CreateDatabase(ctx)
	if err != nil {
		b.Fatal(err)
	}
	url, key := benchServerOn(b, "  engine: postgres\n  postgres:\n    max_conns: 16\n", map[string]string{"COUNTERSIGN_DATABASE_URL": dsn})
	fdsn, err := c.CreateDatabase(ctx)
	if err != nil {
		b.Fatal(err)
	}
	pcfg, err := pgxpool.ParseConfig(fdsn)
	if err != nil {
		b.Fatal(err)
	}
	pcfg.MaxConns = 64
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE floor_w (id bigint PRIMARY KEY, v bytea);
CREATE TABLE floor_r (id bigint PRIMARY KEY, v bytea); INSERT INTO floor_r SELECT g, '\x00' FROM generate_series(1, 1000) g`); err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 300)
	var n atomic.Int64
	cl := benchClient()
	remember := func() error {
		return benchCall(cl, url, key, "remember", fmt.Sprintf(`{"subject":"diet","value":"v-%d"}`, n.Add(1)))
	}
	check := func() error { return benchCall(cl, url, key, "check_before_act", benchCheckBody) }
	insert := func() error {
		_, err := pool.Exec(ctx, `INSERT INTO floor_w (id, v) VALUES ($1, $2)`, n.Add(1), val)
		return err
	}
	sel := func() error {
		var v []byte
		return pool.QueryRow(ctx, `SELECT v FROM floor_r WHERE id = $1`, n.Add(1)%1000+1).Scan(&v)
	}
	for _, s := range []struct {
		name        string
		k           int
		tool, floor func() error
	}{
		{"remember/writers=1", 1, remember, insert},
		{"remember/writers=64", 64, remember, insert},
		{"check_before_act/clients=1", 1, check, sel},
		{"check_before_act/clients=32", 32, check, sel},
	} {
		b.Run(s.name, func(b *testing.B) {
			var tools, floors, ratios []float64
			for range floorRounds {
				var f, t float64
				if s.k == 1 {
					f, t = pairedBlock(b, b.N, s.floor, s.tool)
				} else {
					f, t = timedBlock(b, s.k, b.N, s.floor), timedBlock(b, s.k, b.N, s.tool)
				}
				floors, tools, ratios = append(floors, f), append(tools, t), append(ratios, t/f)
			}
			unit := "wall-µs/op"
			if s.k == 1 {
				unit = "p50-µs"
			}
			b.ReportMetric(median(tools), "tool-"+unit)
			b.ReportMetric(median(floors), "floor-"+unit)
			b.ReportMetric(median(ratios), "ratio")
			b.Logf("%s: rounds' ratios %s", s.name, fmtRatios(ratios))
		})
	}
}

// pairedBlock runs n calls of each of floor and tool from one goroutine,
// call by call alternating, so that both see the same moments of a shared
// machine, and returns their median latencies in µs.
func pairedBlock(b *testing.B, n int, floor, tool func() error) (f, t float64) {
	b.Helper()
	lf, lt := make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		s := time.Now()
		if err := floor(); err != nil {
			b.Fatal(err)
		}
		m := time.Now()
		if err := tool(); err != nil {
			b.Fatal(err)
		}
		lf[i], lt[i] = m.Sub(s), time.Since(m)
	}
	p50 := func(l []time.Duration) float64 {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return float64(l[n/2].Nanoseconds()) / 1e3
	}
	return p50(lf), p50(lt)
}

// timedBlock runs n calls of fn from k goroutines and returns, with one
// goroutine, the median latency in µs; with more, the wall time per call.
func timedBlock(b *testing.B, k, n int, fn func() error) float64 {
	b.Helper()
	var next atomic.Int64
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				s := time.Now()
				if err := fn(); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(s)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	if k > 1 {
		return float64(wall.Microseconds()) / float64(n)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return float64(lat[n/2].Nanoseconds()) / 1e3
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func fmtRatios(xs []float64) string {
	var p []string
	for _, x := range xs {
		p = append(p, strconv.FormatFloat(x, 'f', 2, 64))
	}
	return strings.Join(p, " ")
}

// BenchmarkPostgresReplicaCPU is BENCHMARKS.md's "three replicas spend no
// more CPU per check_before_act than one": real serve processes (this test
// binary run as the countersign binary) on one PostgreSQL (fsync on),
// check_before_act from k clients spread round robin over the replicas;
// the CPU of each replica process (utime + stime from /proc/PID/stat, all
// its threads) and of every PostgreSQL process (the postmaster's children)
// is read before and after each block of b.N calls (and a pause for the
// read audit to drain, whose background work counts too). Rounds alternate
// one replica alone and three, floorRounds of each: the two others are
// started once and stopped (SIGSTOP) while the first serves alone, so
// that no round pays a process's start-up. Reported: the medians of
// CPU-µs per call summed over the running replicas, of the database's, and
// of the rounds' three/one ratios.
//
//	go test -run '^$' -bench PostgresReplicaCPU -benchtime 3000x ./cmd/countersign
func BenchmarkPostgresReplicaCPU(b *testing.B) {
	c, err := pgtest.Start(pgtest.Options{Fsync: true})
	if err != nil {
		pgtest.Unavailable(b, err)
	}
	defer c.Remove()
	ctx := context.Background()
	dsn, err := c.CreateDatabase(ctx)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	full := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\n  postgres:\n    max_conns: 16\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") + "\n" + benchConfig
	if err := os.WriteFile(cfg, []byte(full), 0o600); err != nil {
		b.Fatal(err)
	}
	env := map[string]string{"COUNTERSIGN_DATABASE_URL": dsn}
	var out, errb bytes.Buffer
	if err := run(ctx, []string{"keys", "create", "--config", cfg, "--name", "bench", "--role", "admin"}, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb); err != nil {
		b.Fatalf("keys create: %v (%s)", err, errb.String())
	}
	key := strings.TrimSpace(out.String())
	envList := []string{"COUNTERSIGN_DATABASE_URL=" + dsn}
	first := startReplica(b, cfg, envList)
	cl := benchClient()
	for i := range 10 {
		if err := benchCall(cl, first.URL, key, "remember", fmt.Sprintf(`{"subject":"allergy","value":"allergen-%02d"}`, i)); err != nil {
			b.Fatal(err)
		}
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	postmaster := procStat(b, backend).ppid
	all := []*replica{first, startReplica(b, cfg, envList), startReplica(b, cfg, envList)}
	signal := func(sig syscall.Signal) {
		for _, r := range all[1:] {
			if err := r.cmd.Process.Signal(sig); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, k := range []int{1, 32} {
		b.Run(fmt.Sprintf("clients=%d", k), func(b *testing.B) {
			var one, three, pgOne, pgThree, ratios []float64
			for range floorRounds {
				signal(syscall.SIGSTOP)
				rep, db := replicaBlock(b, all[:1], postmaster, k, b.N, key)
				signal(syscall.SIGCONT)
				one, pgOne = append(one, rep), append(pgOne, db)
				rep3, db3 := replicaBlock(b, all, postmaster, k, b.N, key)
				three, pgThree = append(three, rep3), append(pgThree, db3)
				ratios = append(ratios, rep3/rep)
			}
			b.ReportMetric(median(one), "cpu-µs/call-1-replica")
			b.ReportMetric(median(three), "cpu-µs/call-3-replicas")
			b.ReportMetric(median(ratios), "ratio")
			b.ReportMetric(median(pgOne), "pg-cpu-µs/call-1")
			b.ReportMetric(median(pgThree), "pg-cpu-µs/call-3")
			b.Logf("clients=%d: replicas' CPU-µs per call, 1: %s; 3: %s; ratios %s; PostgreSQL's, 1: %s; 3: %s", k,
				fmtRatios(one), fmtRatios(three), fmtRatios(ratios), fmtRatios(pgOne), fmtRatios(pgThree))
		})
	}
}

// replicaBlock warms up, then runs n check_before_act calls from k
// clients round robin over reps, and returns the CPU-µs per call of the
// replicas (summed) and of PostgreSQL's processes.
func replicaBlock(b *testing.B, reps []*replica, postmaster, k, n int, key string) (replicas, db float64) {
	b.Helper()
	cl := benchClient()
	var rr atomic.Int64
	call := func() error {
		r := reps[int(rr.Add(1))%len(reps)]
		return benchCall(cl, r.URL, key, "check_before_act", benchCheckBody)
	}
	timedBlock(b, k, 100*len(reps), call) // connections, caches
	time.Sleep(100 * time.Millisecond)    // the read audit of the warm-up drains
	before, pgBefore := replicaCPU(b, reps), pgCPU(b, postmaster)
	timedBlock(b, k, n, call)
	time.Sleep(100 * time.Millisecond) // and the block's
	after, pgAfter := replicaCPU(b, reps), pgCPU(b, postmaster)
	var pg time.Duration
	for pid, t := range pgAfter {
		pg += t - pgBefore[pid] // a process started during the block counts from 0
	}
	return float64((after - before).Microseconds()) / float64(n), float64(pg.Microseconds()) / float64(n)
}

func replicaCPU(b *testing.B, reps []*replica) time.Duration {
	var t time.Duration
	for _, r := range reps {
		t += procStat(b, r.cmd.Process.Pid).cpu
	}
	return t
}

// pgCPU is the CPU of the postmaster and of each of its children, by pid.
func pgCPU(b *testing.B, postmaster int) map[int]time.Duration {
	m := map[int]time.Duration{postmaster: procStat(b, postmaster).cpu}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := readProcStat(pid); ok && s.ppid == postmaster {
			m[pid] = s.cpu
		}
	}
	return m
}

type pstat struct {
	ppid int
	cpu  time.Duration // utime + stime, every thread, exited ones included
}

func procStat(b *testing.B, pid int) pstat {
	s, ok := readProcStat(pid)
	if !ok {
		b.Fatalf("no /proc/%d/stat", pid)
	}
	return s
}

// clockTick is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTick = 10 * time.Millisecond

func readProcStat(pid int) (pstat, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return pstat{}, false
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return pstat{}, false
	}
	f := strings.Fields(string(raw[i+1:]))
	// After the name: state(3) ppid(4) ... utime(14) stime(15).
	if len(f) < 13 {
		return pstat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return pstat{ppid: ppid, cpu: time.Duration(ut+st) * clockTick}, true
}
