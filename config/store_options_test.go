package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
)

// TestAuditAndStoreTuningKeys: the audit section's read-verdict queue and
// the store section's bbolt options (BoltOptions), from the defaults, from
// set keys, and refused values.
func TestAuditAndStoreTuningKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		yaml    string
		wantErr []string // every problem reported; nil: valid
		check   func(t *testing.T, c *Config)
	}{
		{"defaults", "", nil, func(t *testing.T, c *Config) {
			ra := c.Audit.ReadAudit()
			if ra.Mode != bot.ReadAuditQueued || ra.Size != bot.DefaultReadQueueSize || ra.Wait != bot.DefaultReadQueueWait {
				t.Fatalf("read audit defaults: %+v, want mode %v, size %v, wait %v", ra, bot.ReadAuditQueued, bot.DefaultReadQueueSize, bot.DefaultReadQueueWait)
			}
			o := c.Store.BoltOptions()
			if !o.GroupCommit || o.NoFreelistSync || !slices.Contains(o.Sequential, "audit") || !slices.Contains(o.Sequential, "mem_facts") {
				t.Fatalf("store options: %+v, want group commit, freelist sync, and audit and mem_facts sequential", o)
			}
		}},
		{"durable reads, scanned freelist", "audit:\n  read_verdicts: durable\n  read_queue_size: 16\n  read_queue_wait: 5ms\nstore:\n  sync_freelist: false\n", nil, func(t *testing.T, c *Config) {
			ra := c.Audit.ReadAudit()
			if ra.Mode != bot.ReadAuditDurable || ra.Size != 16 || ra.Wait != 5*time.Millisecond {
				t.Fatalf("read audit: %+v, want mode %v, size 16, wait 5ms", ra, bot.ReadAuditDurable)
			}
			if !c.Store.BoltOptions().NoFreelistSync {
				t.Fatal("sync_freelist: false did not turn the freelist sync off")
			}
		}},
		{"bad values", "audit:\n  read_verdicts: later\n  read_queue_size: -1\n  read_queue_wait: -1s\n", []string{
			`audit.read_verdicts: "later" is not queued or durable`,
			"audit.read_queue_size: must be at least 1",
			"audit.read_queue_wait: must not be negative",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), t.TempDir())
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("a bad config loaded")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("missing problem %q in:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}
