package approvals

import (
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// bucketApprovalModes holds the soft-approval mode set per memory space.
const bucketApprovalModes = "approval_modes" // user 0x00 agent 0x00 run -> mode

func modeKey(sp policy.Space) []byte {
	return kv.Join([]byte(sp.UserID), []byte(sp.AgentID), []byte(sp.RunID))
}

// LoadApprovalMode returns the mode set for a space, or "" if none was set.
func LoadApprovalMode(tx kv.Tx, sp policy.Space) (string, error) {
	b, err := tx.Get(bucketApprovalModes, modeKey(sp))
	return string(b), err
}

// PutApprovalMode sets the mode of a space.
func PutApprovalMode(tx kv.Tx, sp policy.Space, mode string) error {
	return tx.Put(bucketApprovalModes, modeKey(sp), []byte(mode))
}
