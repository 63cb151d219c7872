package slack

import (
	"fmt"
	"strings"

	"github.com/countersign/countersign/bot"
)

// A Slack user is known to the chat directory by their workspace and user
// id, "T0123ABCD/U0123ABC": a user id alone names someone only within one
// workspace, and an app installed in several (or reached from a Slack
// Connect channel) hears clicks from all of them. In an Enterprise Grid
// org, Slack reports users under the org's id (E…), and their W… ids hold
// across the org's workspaces: "E0123ABCD/W0123ABC".

// ValidTeamID reports whether id looks like a Slack workspace (T…) or
// Enterprise Grid org (E…) id.
func ValidTeamID(id string) bool {
	return len(id) >= 2 && len(id) <= 32 && (id[0] == 'T' || id[0] == 'E') && upperAlnum(id)
}

func upperAlnum(s string) bool {
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// QualifiedUser reads a principal's slack identity: "T…/U…" (or "E…/W…"),
// or a bare user id "U…" in the workspace team (slack.team_id). It returns
// the directory's form, "TEAM/USER", or an error saying what to write.
func QualifiedUser(ref, team string) (string, error) {
	ref = strings.TrimSpace(ref)
	ws, user, qualified := strings.Cut(ref, "/")
	if !qualified {
		ws, user = team, ref
	}
	if !ValidUserID(user) {
		return "", fmt.Errorf("%q is not a Slack user id; use the member id from the person's Slack profile (U… or W…, for example U0123ABC), written as WORKSPACE/USER (T0123ABCD/U0123ABC) or with slack.team_id set", ref)
	}
	switch {
	case qualified && !ValidTeamID(ws):
		return "", fmt.Errorf("%q: %q is not a Slack workspace id; write the workspace's id (T…, or an Enterprise Grid org's E…) before the slash, for example T0123ABCD/%s", ref, ws, user)
	case !qualified && ws == "":
		return "", fmt.Errorf("%q does not say which Slack workspace it belongs to, and a user id alone is matched in every workspace that can reach the app; set slack.team_id to your workspace's id (T…, or an Enterprise Grid org's E…), or write this one as T0123ABCD/%s", ref, user)
	}
	return ws + "/" + user, nil
}

// UserOf is the user id of a directory id ("T1/U2" → "U2"): the id Slack's
// API takes for mentions and private messages.
func UserOf(qualified string) string {
	if i := strings.LastIndexByte(qualified, '/'); i >= 0 {
		return qualified[i+1:]
	}
	return qualified
}

// who is the directory id of the Slack user who clicked or typed: their
// workspace as Slack reports it (the user's team_id, else the team the
// interaction came from) and their user id; or, when the user is mapped
// under their Enterprise Grid org instead, the org's id. A user mapped
// under neither is refused as unmapped, under the first.
func (a *Adapter) who(user, home, enterprise string) string {
	if user == "" {
		return ""
	}
	id := home + "/" + user
	if enterprise == "" || enterprise == home || a.bot.Chat().Caller(bot.SurfaceSlack, id, nil) != nil {
		return id
	}
	if org := enterprise + "/" + user; a.bot.Chat().Caller(bot.SurfaceSlack, org, nil) != nil {
		return org
	}
	return id
}
