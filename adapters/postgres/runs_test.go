package postgres

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestRunsClaimIsAliveUntilReleased: a run claimed through one store is
// alive to another store on the same database until it is released; when
// its session is cut (a database restart, a terminated backend) the claim
// is taken again on a new session, and a run whose process is gone is not
// alive.
func TestRunsClaimIsAliveUntilReleased(t *testing.T) {
	dsn := openDSN(t)
	ctx := context.Background()
	a, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	runs := &Runs{d: a, Interval: 20 * time.Millisecond}
	id, release, err := runs.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other, releaseOther, err := runs.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if other == id {
		t.Fatalf("two claims got the same id %s", id)
	}
	alive := func(id string) bool {
		t.Helper()
		ok, err := b.Runs().Alive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !alive(id) || !alive(other) {
		t.Fatalf("claimed runs %s and %s: alive %v and %v, want both", id, other, alive(id), alive(other))
	}
	if alive("12345") || alive("not-an-id") {
		t.Fatal("a run nobody claimed is alive")
	}

	// Cut the claim's session: it is taken again.
	n, _ := strconv.ParseInt(id, 10, 64)
	holder := func() int {
		t.Helper()
		var pid int
		err := b.Pool().QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND granted`, int64(runClass), n).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	old := holder()
	var cut bool
	if err := b.Pool().QueryRow(ctx, `SELECT pg_terminate_backend($1)`, old).Scan(&cut); err != nil || !cut {
		t.Fatalf("terminate the claim's session (pid %d): %v, %v; want true", old, cut, err)
	}
	// pg_terminate_backend only signals: the old session holds the lock
	// until it has exited. The claim is taken again when another session
	// holds it.
	waitUntil(t, "the claim to be taken again on a new session", func() bool { p := holder(); return p != 0 && p != old })

	release()
	if alive(id) {
		t.Fatalf("run %s is alive after release", id)
	}
	if !alive(other) {
		t.Fatalf("releasing %s ended %s too", id, other)
	}
	releaseOther()
	if alive(other) {
		t.Fatalf("run %s is alive after release", other)
	}
}
