// Package pgtest runs throwaway PostgreSQL clusters for tests: initdb into a
// temporary directory, pg_ctl start on a free loopback port with the socket
// in that directory, and an immediate stop at the end.
//
// A test binary shares one cluster, started on first use: its TestMain calls
// Main, and each test asks for a fresh database with DSN. Without PostgreSQL
// on the machine the tests are skipped with a message saying how to run
// them, except under CI (CI=true), where they fail: CI never skips them.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is returned by Start when no initdb is found.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL's initdb was not found; install the postgresql package (apt-get install -y postgresql) or set PG_BIN to the directory of initdb and pg_ctl")

// Options tune Start.
type Options struct {
	// Fsync keeps fsync on (for benchmarks). Functional tests run without
	// it: a throwaway cluster need not survive a power cut.
	Fsync bool
	// Settings are extra "name=value" server settings.
	Settings []string
}

// Cluster is a running throwaway PostgreSQL cluster.
type Cluster struct {
	bin  string // the directory of initdb and pg_ctl
	dir  string // temporary: data/, the socket, the log
	port int
	opt  Options
	n    atomic.Int64 // databases created
}

// BinDir finds PostgreSQL's binaries: $PG_BIN, then the newest
// /usr/lib/postgresql/*/bin, then the PATH.
func BinDir() (string, error) {
	if d := os.Getenv("PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) > 0 {
		sort.Slice(m, func(i, j int) bool { return version(m[i]) > version(m[j]) })
		return filepath.Dir(m[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNotInstalled
}

func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Start creates and starts a cluster. The caller must Stop it.
func Start(opt Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	reapStale(bin)
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	// Who owns the cluster, so that a later Start can stop it if this
	// process dies without stopping it (a panic, a kill).
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// initdb refuses to run as root; when we are root it runs as the
	// postgres user, who must be able to write here.
	if err := os.Chmod(dir, 0o777); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, opt: opt}
	if out, err := c.cmd("initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	var last error
	for range 3 { // a free port can be taken between finding and binding it
		if c.port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if last = c.Start(); last == nil {
			return c, nil
		}
	}
	os.RemoveAll(dir)
	return nil, last
}

// reapStale stops and removes the clusters of test processes that died
// without stopping them.
func reapStale(bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		c := &Cluster{bin: bin, dir: dir}
		_ = c.Remove()
	}
}

// processAlive reports whether a process with pid exists.
func processAlive(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return err == nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// cmd runs one of PostgreSQL's programs, as the postgres user when we are
// root.
func (c *Cluster) cmd(name string, args ...string) *exec.Cmd {
	prog := filepath.Join(c.bin, name)
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", prog}, args...)...)
	}
	return exec.Command(prog, args...)
}

// Start starts the server (again, after Stop) on the cluster's port.
func (c *Cluster) Start() error {
	o := []string{"-p", strconv.Itoa(c.port), "-k", c.dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"}
	if !c.opt.Fsync {
		o = append(o, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	for _, s := range c.opt.Settings {
		o = append(o, "-c", s)
	}
	out, err := c.cmd("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "pg.log"), "-w", "-t", "60", "-o", strings.Join(o, " "), "start").CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "pg.log"))
		return fmt.Errorf("pgtest: pg_ctl start: %v\n%s\n%s", err, out, tail(log))
	}
	return nil
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// Stop stops the server at once (-m immediate: like a crash, recovery on
// the next start).
func (c *Cluster) Stop() error {
	out, err := c.cmd("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Remove stops the server and deletes the cluster's directory.
func (c *Cluster) Remove() error {
	err := c.Stop()
	if rerr := os.RemoveAll(c.dir); err == nil {
		err = rerr
	}
	return err
}

// Port is the server's loopback TCP port.
func (c *Cluster) Port() int { return c.port }

// URL returns the DSN of database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// CreateDatabase creates a new, empty database and returns its DSN.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d", c.n.Add(1))
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return c.URL(name), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shared is the cluster of a test binary (Main, DSN).
var shared struct {
	mu      sync.Mutex
	started bool
	c       *Cluster
	err     error
}

// Main runs a test binary's tests and then stops its shared cluster, if one
// was started. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c != nil {
		if err := shared.c.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		shared.c = nil
	}
	return code
}

// Shared returns the test binary's cluster, starting it on first use. Without
// PostgreSQL it skips tb, or fails it when CI=true. The binary's TestMain
// must call Main, which stops the cluster.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		shared.c, shared.err = Start(Options{})
	}
	if shared.err != nil {
		Unavailable(tb, shared.err)
	}
	return shared.c
}

// Unavailable ends tb for want of PostgreSQL: a skip that says how to run
// the test, or, under CI (CI=true), a failure.
func Unavailable(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		tb.Skipf("skipped: %v. These tests run PostgreSQL 15 themselves (as the postgres user when run as root); CI=true makes this skip a failure.", err)
	}
	tb.Fatalf("PostgreSQL is needed here: %v", err)
}

// DSN returns the URL of a fresh, empty database on the shared cluster.
func DSN(tb testing.TB) string {
	tb.Helper()
	c := Shared(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn, err := c.CreateDatabase(ctx)
	if err != nil {
		tb.Fatalf("pgtest: create a database: %v", err)
	}
	return dsn
}
