package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Machine describes where a run happened.
type Machine struct {
	CPU       string
	Cores     int
	MemoryGiB float64
	Kernel    string
	Go        string
	Dir       string // where the store files and the fsync probe were
	// Fsync is a 4 KiB overwrite plus fdatasync, in a loop, on Dir's disk.
	FsyncP50, FsyncP99 time.Duration
	FsyncRate          float64
	// LoadBefore is /proc/loadavg when the run started (empty where there
	// is none); the report adds the load at its end: the machine may be
	// shared.
	LoadBefore string
}

// LoadAverage returns the 1, 5 and 15 minute load averages of
// /proc/loadavg, or "" where there is none.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Describe reads the machine and measures the raw fsync rate of dir's disk
// with n 4 KiB write+fdatasync rounds.
func Describe(dir string, n int) (Machine, error) {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), Dir: dir, LoadBefore: LoadAverage()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb float64
			if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %f kB", &kb); err == nil {
				m.MemoryGiB = kb / (1 << 20)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	s, err := FsyncProbe(dir, n)
	if err != nil {
		return m, err
	}
	m.FsyncP50, m.FsyncP99 = s.Quantile(0.5), s.Quantile(0.99)
	var total time.Duration
	for _, d := range s.d {
		total += d
	}
	m.FsyncRate = float64(len(s.d)) / total.Seconds()
	return m, nil
}

// FsyncProbe times n rounds of a 4 KiB write followed by fdatasync (Go's
// File.Sync is fsync; bbolt uses fdatasync, which for an overwrite of
// allocated blocks is the same I/O).
func FsyncProbe(dir string, n int) (*Sample, error) {
	path := filepath.Join(dir, "fsync-probe.bin")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 4096)
	// Allocate the blocks first, so the loop measures overwrites.
	for i := 0; i < 16; i++ {
		if _, err := f.WriteAt(buf, int64(i)*4096); err != nil {
			return nil, err
		}
	}
	if err := fdatasync(f); err != nil {
		return nil, err
	}
	s := &Sample{}
	for i := 0; i < n; i++ {
		buf[0] = byte(i)
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i%16)*4096); err != nil {
			return nil, err
		}
		if err := fdatasync(f); err != nil {
			return nil, err
		}
		s.Add(time.Since(t0))
	}
	return s, nil
}
