// Package approvals holds what a person decides and the record of it:
// action requests and their state machine (pending, approved with or
// without changes, denied, expired), quorum and the votes behind it,
// standing grants, soft-approval modes, and the hash-chained, signed audit
// log with its anchors, archive and retention.
//
// It stores through kv and takes its rules from policy; it has no clock
// of its own and does no I/O outside the kv transaction it is handed, so
// each operation is one transaction covering the state change and its
// audit entry.
package approvals
