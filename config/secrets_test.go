package config

import (
	"strings"
	"testing"
)

// TestSecretsFromTheEnvironment: the database URL and the metrics token
// are read from the variables their *_env keys name; an unset or empty
// variable is an error naming the key and the variable (the metrics token
// never falls open to no token), and only a metrics_token_env left out
// serves /metrics without one.
func TestSecretsFromTheEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PG_URL": "postgres://cs@db:5432/cs", "METRICS": "m-token"}
	getenv := func(k string) string { return env[k] }

	if dsn, err := (PostgresConfig{DSNEnv: "PG_URL"}).DSN(getenv); err != nil || dsn != env["PG_URL"] {
		t.Errorf("DSN = %q, %v; want $PG_URL's URL", dsn, err)
	}
	if _, err := (PostgresConfig{DSNEnv: "PG_NONE"}).DSN(getenv); err == nil || !strings.Contains(err.Error(), "store.postgres.dsn_env: $PG_NONE is empty") {
		t.Errorf("DSN of an unset variable: %v, want store.postgres.dsn_env and $PG_NONE named", err)
	}

	if tok, err := (HTTPConfig{MetricsTokenEnv: "METRICS"}).MetricsToken(getenv); err != nil || tok.Reveal() != "m-token" {
		t.Errorf("MetricsToken = %q, %v; want $METRICS's token", tok.Reveal(), err)
	}
	if tok, err := (HTTPConfig{MetricsTokenEnv: "METRICS_NONE"}).MetricsToken(getenv); err == nil || tok != "" || !strings.Contains(err.Error(), "http.metrics_token_env: the environment variable METRICS_NONE is empty or unset") {
		t.Errorf("MetricsToken of an unset variable: %q, %v; want an error naming http.metrics_token_env and METRICS_NONE", tok.Reveal(), err)
	}
	if tok, err := (HTTPConfig{}).MetricsToken(getenv); err != nil || tok != "" {
		t.Errorf("MetricsToken without the key: %q, %v; want no token and no error", tok.Reveal(), err)
	}
}
