package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ---- limits ----

// LimitsConfig bounds what one call may carry and what the process may
// hold (docs/operations.md, "Limits").
type LimitsConfig struct {
	// MemoryLimit is the Go runtime's soft memory limit (GOMEMLIMIT's
	// syntax: 512MiB, 1GiB, a number of bytes, or off). The GOMEMLIMIT
	// environment variable, when set, wins.
	MemoryLimit string `yaml:"memory_limit"`
	// MaxArgumentsBytes bounds confirm_action's arguments (bytes of JSON).
	MaxArgumentsBytes int `yaml:"max_arguments_bytes"`
	// MaxDryRunBytes bounds confirm_action's dry_run (bytes of JSON).
	MaxDryRunBytes int `yaml:"max_dry_run_bytes"`
	// OpenItemsPerRequester is how many items (action and consent
	// requests, questions, memory proposals) one principal may keep
	// awaiting a decision; one more is refused with 429.
	OpenItemsPerRequester int `yaml:"open_items_per_requester"`
}

// Defaults of the limits section.
const (
	defaultMemoryLimit   = "512MiB"
	defaultMaxArgsBytes  = 64 << 10
	defaultMaxDryRunSize = 64 << 10
	defaultOpenItems     = 100 // the bot's default (limits.open_items_per_requester)
	maxOpenItems         = 100000
)

func (l *LimitsConfig) defaults() {
	if l.MemoryLimit == "" {
		l.MemoryLimit = defaultMemoryLimit
	}
	if l.MaxArgumentsBytes == 0 {
		l.MaxArgumentsBytes = defaultMaxArgsBytes
	}
	if l.MaxDryRunBytes == 0 {
		l.MaxDryRunBytes = defaultMaxDryRunSize
	}
	if l.OpenItemsPerRequester == 0 {
		l.OpenItemsPerRequester = defaultOpenItems
	}
}

func (l LimitsConfig) validate(p *problems) {
	if _, err := ParseMemoryLimit(l.MemoryLimit); err != nil {
		p.add("limits.memory_limit", "%v", err)
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"limits.max_arguments_bytes", l.MaxArgumentsBytes}, {"limits.max_dry_run_bytes", l.MaxDryRunBytes}} {
		if f.v < 256 {
			p.add(f.key, "must be at least 256 (bytes of JSON)")
		}
	}
	if n := l.OpenItemsPerRequester; n < 1 || n > maxOpenItems {
		p.add("limits.open_items_per_requester", "must be 1 to %d (items one principal may keep awaiting a decision; the default is %d)", maxOpenItems, defaultOpenItems)
	}
}

// ParseMemoryLimit reads GOMEMLIMIT's syntax: a number of bytes with an
// optional unit (B, KiB, MiB, GiB, TiB), or "off" (no limit:
// math.MaxInt64).
func ParseMemoryLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return math.MaxInt64, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult, num := int64(1), s
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			mult, num = u.mult, n
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a memory size: write it as GOMEMLIMIT does (for example 512MiB or 2GiB), or off", s)
	}
	if n*mult < 64<<20 {
		return 0, fmt.Errorf("%q is below 64MiB: the collector would run all the time; raise it, or write off", s)
	}
	return n * mult, nil
}
