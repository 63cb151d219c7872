package bot

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// TestCollectReadsRecordsOneEntryPerView: reads made under CollectReads
// write nothing of their own, with or without the queue of read audits;
// Record writes them as one entry (durably, before the view is shown);
// nothing gathered writes nothing; reads outside it are audited as before.
func TestCollectReadsRecordsOneEntryPerView(t *testing.T) {
	for _, queued := range []bool{false, true} {
		t.Run(fmt.Sprintf("queued=%v", queued), func(t *testing.T) {
			e := newReadAuditEnv(t, filepath.Join(t.TempDir(), "r.db"))
			if queued {
				e.start(t, ReadAuditOptions{})
			}
			ctx, reads := CollectReads(context.Background())
			for _, s := range []string{"allergy", "active_medication", "weight"} {
				if _, err := e.b.Call(ctx, e.agent, "peek", []byte(`{"subject":"`+s+`"}`)); err != nil {
					t.Fatal(err)
				}
			}
			if reads.length() != 3 {
				t.Fatalf("gathered %d reads, want 3", reads.length())
			}
			if err := e.b.FlushAudit(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := e.entries(t); len(got) != 0 {
				t.Fatalf("the reads wrote %v before Record; want nothing", got)
			}
			if err := reads.Record(context.Background(), e.b, e.agent, Space{UserID: "patient_42"}, "web_view", "web: memory page"); err != nil {
				t.Fatal(err)
			}
			want := "web_view web: memory page: check_before_act allergy: SAFE; check_before_act active_medication: SAFE; check_before_act weight: SAFE"
			if got := e.entries(t); len(got) != 1 || got[0] != want {
				t.Fatalf("after Record the chain is %q, want [%q]", got, want)
			}
			_, none := CollectReads(context.Background())
			if err := none.Record(context.Background(), e.b, e.agent, Space{}, "web_view", "nothing"); err != nil {
				t.Fatal(err)
			}
			e.peek(t, "outside")
			if err := e.b.FlushAudit(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := e.entries(t); len(got) != 2 || got[1] != "check_before_act outside: SAFE" {
				t.Fatalf("an empty Record and a read outside a view: %q, want 2 entries, the second %q", got, "check_before_act outside: SAFE")
			}
		})
	}
}
