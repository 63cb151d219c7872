package chat

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
)

// TestVoteLineSaysWhyAVoteNoLongerCounts: an approval voided by its
// voter's suspension says so, not that the arguments or facts changed.
func TestVoteLineSaysWhyAVoteNoLongerCounts(t *testing.T) {
	at := time.Date(2026, 3, 2, 8, 5, 0, 0, time.UTC)
	void := VoteLine(bot.VoteView{By: "dr_smith [U0123ABC]", Approve: true, At: at, Void: "suspended from approving: slack: the Slack account was deactivated"})
	if want := "dr_smith [U0123ABC] approved at 2026-03-02 08:05 UTC, on no card (an API call or a typed command); no longer counts: suspended from approving: slack: the Slack account was deactivated"; void != want {
		t.Errorf("VoteLine = %q\nwant      %q", void, want)
	}
	old := VoteLine(bot.VoteView{By: "nurse_jo [U0456DEF]", Approve: true, At: at})
	if !strings.HasSuffix(old, "no longer counts (cast on earlier arguments or facts)") {
		t.Errorf("a vote on earlier arguments: %q, want it to end with %q", old, "no longer counts (cast on earlier arguments or facts)")
	}
	if got := VoteLine(bot.VoteView{By: "a [b]", Approve: true, At: at, Counts: true}); strings.Contains(got, "no longer counts") {
		t.Errorf("a counting vote: %q, want no %q in it", got, "no longer counts")
	}
}
