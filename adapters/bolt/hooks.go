package bolt

import (
	"github.com/countersign/countersign/kv"
	bbolt "go.etcd.io/bbolt"
)

// runHooks runs the PreCommits of one attempt of a bbolt transaction
// (kv.Hooks.Run) in a tx view of t.
func runHooks(h *kv.Hooks, t *bbolt.Tx, sequential map[string]bool) error {
	return h.Run(&tx{t: t, hooks: h, sequential: sequential})
}

// Finally implements kv.Finisher on read-write transactions.
func (x *tx) Finally(key string, newHook func() kv.PreCommit) (kv.PreCommit, bool) {
	if x.hooks == nil {
		return nil, false
	}
	return x.hooks.Finally(key, newHook), true
}

var _ kv.Finisher = (*tx)(nil)
