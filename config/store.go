package config

import (
	"fmt"
	"regexp"
	"time"
)

// The store engines (store.engine).
const (
	EngineBolt     = "bbolt"
	EnginePostgres = "postgres"
)

// PostgresConfig is store.postgres: the database of store.engine: postgres.
type PostgresConfig struct {
	// DSNEnv names the environment variable that holds the database URL
	// (postgres://user:password@host:5432/db); the URL is never in the file.
	// Default COUNTERSIGN_DATABASE_URL.
	DSNEnv string `yaml:"dsn_env"`
	// MaxConns bounds each replica's connection pool. Default 10.
	MaxConns int `yaml:"max_conns"`
	// StatementTimeout bounds every statement on the server. Default 5s.
	StatementTimeout time.Duration `yaml:"statement_timeout"`
}

// DSN is the database URL, read from the variable dsn_env names; an unset
// one is an error naming it.
func (p PostgresConfig) DSN(getenv func(string) string) (string, error) {
	dsn := getenv(p.DSNEnv)
	if dsn == "" {
		return "", fmt.Errorf("store.postgres.dsn_env: $%s is empty; set it to the database's URL (postgres://user:password@host:5432/db)", p.DSNEnv)
	}
	return dsn, nil
}

// engineDefaults fills the keys of store.engine and store.postgres.
func (s *StoreConfig) engineDefaults() {
	if s.Engine == "" {
		s.Engine = EngineBolt
	}
	if s.Postgres.DSNEnv == "" {
		s.Postgres.DSNEnv = "COUNTERSIGN_DATABASE_URL"
	}
	if s.Postgres.MaxConns == 0 {
		s.Postgres.MaxConns = 10
	}
	if s.Postgres.StatementTimeout == 0 {
		s.Postgres.StatementTimeout = 5 * time.Second
	}
}

// validate checks the store section.
func (s StoreConfig) validate(p *problems) {
	switch s.Engine {
	case EngineBolt, EnginePostgres:
	default:
		p.add("store.engine", "%q is not an engine: bbolt (one process, the default) or postgres (several replicas on one database)", s.Engine)
	}
	if s.Postgres.MaxConns < 5 || s.Postgres.MaxConns > 1000 {
		// Three connections are held for good (leadership, wake-ups, the
		// run's claim), one writes, and reads need the rest.
		p.add("store.postgres.max_conns", "must be between 5 and 1000 (three connections are held by every replica for leadership, wake-ups and its running marker)")
	}
	if s.Postgres.StatementTimeout < 100*time.Millisecond {
		p.add("store.postgres.statement_timeout", "must be at least 100ms (for example 5s)")
	}
	if !envName.MatchString(s.Postgres.DSNEnv) {
		// The value is not repeated: it may be the URL, password included.
		p.add("store.postgres.dsn_env", "must name the environment variable that holds the database URL (for example COUNTERSIGN_DATABASE_URL); the URL itself never goes in the file")
	}
}

// envName is the form of an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
