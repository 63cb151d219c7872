package bolt

import (
	"fmt"

	"github.com/countersign/countersign/kv"
	bbolt "go.etcd.io/bbolt"
)

// hookSet holds the PreCommits of one bbolt transaction (kv.Finisher). It
// belongs to one attempt of one transaction: a group that is rolled back
// and re-run starts with a fresh set.
type hookSet struct {
	keys  map[string]kv.PreCommit
	order []kv.PreCommit
}

func (h *hookSet) finally(key string, newHook func() kv.PreCommit) kv.PreCommit {
	if p, ok := h.keys[key]; ok {
		return p
	}
	p := newHook()
	if h.keys == nil {
		h.keys = map[string]kv.PreCommit{}
	}
	h.keys[key] = p
	h.order = append(h.order, p)
	return p
}

// run runs every registered PreCommit in order of registration (including
// any registered while they run), each once. A panic becomes an error, so
// a bad hook cannot take the committer down.
func (h *hookSet) run(t *bbolt.Tx, sequential map[string]bool) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("bolt: pre-commit hook panicked: %v", v)
		}
	}()
	x := &tx{t: t, hooks: h, sequential: sequential}
	for i := 0; i < len(h.order); i++ {
		if err := h.order[i].BeforeCommit(x); err != nil {
			return err
		}
	}
	return nil
}

// Finally implements kv.Finisher on read-write transactions.
func (x *tx) Finally(key string, newHook func() kv.PreCommit) (kv.PreCommit, bool) {
	if x.hooks == nil {
		return nil, false
	}
	return x.hooks.finally(key, newHook), true
}

var _ kv.Finisher = (*tx)(nil)
