// Package reliability holds Countersign's reliability battery: tests that
// run the real binary as a child and kill it, inject storage faults, race
// concurrent decisions and replay signed deliveries. It has no code of its
// own; `go test ./reliability/` runs it (CI runs it with -race).
package reliability
