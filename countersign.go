// Package countersign embeds the annotated default configuration, so that
// the binary runs as it is with no file beside it. The code lives in the
// subpackages: cmd, bot, memory, approvals, policy, adapters.
package countersign

import _ "embed"

// DefaultConfig is config.yaml at the root of the repository.
//
//go:embed config.yaml
var DefaultConfig []byte
