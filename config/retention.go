package config

import (
	"time"

	"github.com/countersign/countersign/adapters/webhook"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
)

// ---- retention ----

// RetentionConfig is the retention section: how long records are kept after
// they close, before the sweeper deletes them in bounded batches. The audit
// chain is never pruned here.
type RetentionConfig struct {
	// Decided action requests, consent requests, answered (or expired)
	// questions and memory proposals closed without being applied: 0 (the
	// default) keeps them until an operator sets a period, since clinical
	// and operational records have legal retention periods.
	ActionRequests  time.Duration `yaml:"action_requests"`
	ConsentRequests time.Duration `yaml:"consent_requests"`
	Questions       time.Duration `yaml:"questions"`
	MemoryProposals time.Duration `yaml:"memory_proposals"`
	// Idempotency is how long Idempotency-Key records and the action_id
	// records of closed requests are kept; 0 means 168h. At least 24h.
	Idempotency time.Duration `yaml:"idempotency"`
	// Deliveries is how long chat delivery ids are kept to drop retried
	// deliveries; 0 means 168h. At least 1h.
	Deliveries time.Duration `yaml:"deliveries"`
}

// minDeliveryRetention is the shortest retention.deliveries accepted: Slack
// and Discord retry a delivery within minutes.
const minDeliveryRetention = time.Hour

func (r *RetentionConfig) defaults() {
	if r.Idempotency == 0 {
		r.Idempotency = webhook.DefaultIdempotencyTTL
	}
	if r.Deliveries == 0 {
		r.Deliveries = bot.DefaultDeliveryTTL
	}
}

func (r RetentionConfig) validate(p *problems) {
	for _, f := range []struct {
		key string
		d   time.Duration
	}{
		{"retention.action_requests", r.ActionRequests},
		{"retention.consent_requests", r.ConsentRequests},
		{"retention.questions", r.Questions},
		{"retention.memory_proposals", r.MemoryProposals},
	} {
		if f.d < 0 {
			p.add(f.key, "must not be negative (0s keeps them; a period such as 8760h deletes them that long after they closed)")
		}
	}
	if r.Idempotency < webhook.MinIdempotencyTTL {
		p.add("retention.idempotency", "%s is shorter than %s: a client retrying within a day must get its first answer (0s means the default 168h)", r.Idempotency, webhook.MinIdempotencyTTL)
	}
	if r.Deliveries < minDeliveryRetention {
		p.add("retention.deliveries", "%s is shorter than %s: chat platforms retry a delivery within minutes (0s means the default 168h)", r.Deliveries, minDeliveryRetention)
	}
}

// Requests is the retention of the action tools' requests.
func (r RetentionConfig) Requests() actiontools.Retention {
	return actiontools.Retention{Actions: r.ActionRequests, Consents: r.ConsentRequests, Questions: r.Questions, ActionIDs: r.Idempotency}
}
