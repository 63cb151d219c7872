package config

import (
	"strings"
	"testing"
	"time"

	countersign "github.com/countersign/countersign"
)

func TestRetentionDefaultsKeepDecisions(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(countersign.DefaultConfig, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Retention
	if r.ActionRequests != 0 || r.ConsentRequests != 0 || r.Questions != 0 || r.MemoryProposals != 0 {
		t.Fatalf("decisions are pruned by default: %+v; want action, consent, question and memory proposal retention 0 (kept)", r)
	}
	if r.Idempotency != 168*time.Hour || r.Deliveries != 168*time.Hour {
		t.Fatalf("idempotency/deliveries defaults: %+v; want 168h each", r)
	}
	// Absent section: the same defaults.
	cfg, err = Parse([]byte("listen: 127.0.0.1:1\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Retention.Idempotency != 168*time.Hour || cfg.Retention.Deliveries != 168*time.Hour || cfg.Retention.ActionRequests != 0 {
		t.Fatalf("no retention section: %+v; want idempotency and deliveries 168h, action requests 0", cfg.Retention)
	}
	if got := cfg.Retention.Requests(); got.ActionIDs != 168*time.Hour || got.Actions != 0 {
		t.Fatalf("action tools retention = %+v, want action ids 168h, actions 0", got)
	}
}

func TestRetentionBadValuesNamed(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("retention:\n  action_requests: -1h\n  memory_proposals: -5m\n  idempotency: 1h\n  deliveries: 5m\n"), t.TempDir())
	if err == nil {
		t.Fatal("bad retention accepted")
	}
	for _, want := range []string{
		"retention.action_requests: must not be negative",
		"retention.memory_proposals: must not be negative",
		"retention.idempotency: 1h0m0s is shorter than 24h0m0s",
		"retention.deliveries: 5m0s is shorter than 1h0m0s",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	cfg, err := Parse([]byte("retention:\n  action_requests: 8760h\n  questions: 720h\n  idempotency: 48h\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Retention.Requests(); r.Actions != 8760*time.Hour || r.Questions != 720*time.Hour || r.Consents != 0 || r.ActionIDs != 48*time.Hour {
		t.Fatalf("parsed: %+v; want actions 8760h, questions 720h, consents 0, action ids 48h", r)
	}
}
