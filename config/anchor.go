package config

import (
	"path/filepath"
	"time"
)

// AnchorConfig is audit.anchor: where and how often the audit chain's
// signed head is written outside the store, so that a rollback, a
// truncation or a replaced chain is detected (docs/audit.md, "Anchors").
type AnchorConfig struct {
	// File is the append-only anchor file, one JSON line per signed head,
	// fsynced. It must not be in the store's directory. Empty (the
	// default) turns anchoring off, and every start warns that the chain
	// then cannot prove it was not rolled back.
	File string `yaml:"file"`
	// Every is how often the head is anchored when it has moved (it is
	// also anchored at start and at a clean stop). Default 1m.
	Every time.Duration `yaml:"every"`
	// Channel would post each anchor to a chat channel: not built yet, so
	// setting it is an error rather than a setting that does nothing.
	Channel string `yaml:"channel"`
}

// DefaultAnchorEvery is audit.anchor.every's default.
const DefaultAnchorEvery = time.Minute

func (a *AnchorConfig) defaults(resolve func(string) string) {
	a.File = resolve(a.File)
	if a.Every == 0 {
		a.Every = DefaultAnchorEvery
	}
}

// validate checks audit.anchor; the file must not be in the directory of a
// bbolt store.
func (a AnchorConfig) validate(p *problems, store StoreConfig) {
	if a.Every < time.Second {
		p.add("audit.anchor.every", "must be at least 1s (default 1m)")
	}
	if a.Channel != "" {
		p.add("audit.anchor.channel", "posting anchors to chat is not supported yet; remove the key and set audit.anchor.file")
	}
	if a.File == "" || store.Engine == EnginePostgres {
		return
	}
	af, err1 := filepath.Abs(a.File)
	sf, err2 := filepath.Abs(store.Path)
	switch {
	case err1 != nil || err2 != nil:
	case af == sf:
		p.add("audit.anchor.file", "is the store itself")
	case filepath.Dir(af) == filepath.Dir(sf):
		p.add("audit.anchor.file", "%s is in the store's directory; put it where the store's writer cannot rewrite it (another directory, volume or host; see docs/audit.md, \"Anchors\")", a.File)
	}
}
