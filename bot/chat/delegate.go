package chat

// This file is the delegate command: a person lends their approvals to
// another for a window (bot/delegations.go; who may then decide what is
// the one decision rule's, policy/delegation.go).
//
//	delegate @bob until 18:00          until the next 18:00 UTC
//	delegate bob until 2026-12-03 09:00
//	delegate bob for 4h                4h, 90m, 2d (at most 14 days)
//	delegate off                       end yours (or, delegate off alice: the
//	                                   delegate hands it back; an admin ends anyone's)
//	delegate                           what runs now: yours, and what is lent to you

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
)

// CmdDelegate is the delegate command.
const CmdDelegate = "delegate"

// delegateOff is the word that ends a delegation: "delegate off".
const delegateOff = "off"

// parseDelegate parses the words after "delegate": a person and a window
// ("@bob until 18:00", "bob for 4h"), "off" with an optional person, or
// nothing. ok is false when they fit none of these.
func parseDelegate(args []chatField) (ChatCommand, bool) {
	c := ChatCommand{Name: CmdDelegate}
	switch {
	case len(args) == 0:
		return c, true
	case strings.EqualFold(args[0].text, delegateOff):
		c.Until = delegateOff
		if len(args) == 2 && validPerson(args[1].text) {
			c.Delegate = args[1].text
			return c, true
		}
		return c, len(args) == 1
	case len(args) >= 3 && validPerson(args[0].text) && (strings.EqualFold(args[1].text, "until") || strings.EqualFold(args[1].text, "for")):
		words := make([]string, len(args)-1)
		for i, a := range args[1:] {
			words[i] = strings.ToLower(a.text)
		}
		c.Delegate, c.Until = args[0].text, strings.Join(words, " ")
		if _, err := delegationEnd(c.Until, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			return ChatCommand{}, false
		}
		return c, true
	}
	return ChatCommand{}, false
}

// validPerson accepts a person as typed: a principal name (optionally
// with a leading @) or a platform mention (<@U0123ABC>, <@!123>,
// <@U0123ABC|bob>).
func validPerson(s string) bool {
	if len(s) > 128 {
		return false
	}
	if _, ok := mention(s); ok {
		return true
	}
	return bot.ValidateDirectoryName(strings.TrimPrefix(s, "@")) == nil
}

// mention returns the account id of a platform mention ("<@U0123ABC>",
// "<@!123>", "<@U0123ABC|bob>"), and whether s is one.
func mention(s string) (string, bool) {
	if !strings.HasPrefix(s, "<@") || !strings.HasSuffix(s, ">") {
		return "", false
	}
	id := strings.TrimPrefix(strings.TrimSuffix(s[2:], ">"), "!")
	id, _, _ = strings.Cut(id, "|")
	if id == "" || len(id) > 64 {
		return "", false
	}
	for _, r := range id {
		if (r < '0' || r > '9') && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') {
			return "", false
		}
	}
	return id, true
}

// delegationEnd reads a window as typed after the person, at now: "until
// 18:00" (the next 18:00 UTC), "until 2026-12-03 09:00" (UTC), "until
// 2026-12-03T09:00:00Z" (RFC 3339, any offset), "for 4h", "for 90m", "for
// 2d".
func delegationEnd(phrase string, now time.Time) (time.Time, error) {
	word, rest, _ := strings.Cut(strings.TrimSpace(phrase), " ")
	rest = strings.TrimSpace(rest)
	switch word {
	case "for":
		if d, ok := strings.CutSuffix(rest, "d"); ok {
			n, err := strconv.Atoi(d)
			if err != nil || n <= 0 || n > 366 {
				return time.Time{}, fmt.Errorf("%q is not a number of days (a delegation runs at most 14)", rest)
			}
			return now.Add(time.Duration(n) * 24 * time.Hour), nil
		}
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return time.Time{}, fmt.Errorf("%q is not a length of time such as 4h, 90m or 2d", rest)
		}
		return now.Add(d), nil
	case "until":
		if t, err := time.Parse(time.RFC3339, strings.ToUpper(rest)); err == nil {
			return t, nil
		}
		if t, err := time.Parse("2006-01-02 15:04", rest); err == nil {
			return t, nil
		}
		if t, err := time.Parse("15:04", rest); err == nil {
			n := now.UTC()
			at := time.Date(n.Year(), n.Month(), n.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
			if !at.After(n) {
				at = at.AddDate(0, 0, 1)
			}
			return at, nil
		}
		return time.Time{}, fmt.Errorf("%q is not a time such as 18:00, 2026-12-03 09:00 (UTC) or 2026-12-03T09:00:00Z", rest)
	}
	return time.Time{}, fmt.Errorf("say until when (until 18:00) or for how long (for 4h)")
}

// delegate runs the delegate command for the mapped caller.
func (s session) delegate(ctx context.Context, c ChatCommand) string {
	if msg, ok := s.mapped(ctx, CmdDelegate); !ok {
		return msg
	}
	switch {
	case c.Until == "" && c.Delegate == "":
		return s.delegations(ctx)
	case c.Until == delegateOff:
		from := ""
		if c.Delegate != "" {
			if from = s.person(c.Delegate); from == "" {
				return fmt.Sprintf("I don't know who %s is here, so I ended nothing. Name them by their Countersign name (`delegate off alice`).", bot.OneLine(c.Delegate, 64))
			}
		}
		d, err := s.b.Delegations().End(ctx, s.caller, from, "ended from "+s.surface+" by "+s.caller.String())
		if err != nil {
			return s.failure(err, couldNotComplete, "ending a delegation")
		}
		if d == nil {
			if from == "" {
				return "You have no delegation running, so there was nothing to end."
			}
			return fmt.Sprintf("%s has no delegation running, so there was nothing to end.", bot.OneLine(from, 64))
		}
		return fmt.Sprintf("Ended: %s no longer lends their approvals to %s. From now on %s decides only what they may decide themselves.", d.From, d.To, d.To)
	}
	to := s.person(c.Delegate)
	if to == "" {
		return fmt.Sprintf("I don't know who %s is here, so I delegated nothing. Mention them, or name them by their Countersign name (`delegate bob until 18:00`).", bot.OneLine(c.Delegate, 64))
	}
	until, err := delegationEnd(c.Until, s.b.Now())
	if err != nil {
		return "I delegated nothing: " + err.Error() + "."
	}
	d, err := s.b.Delegations().Set(ctx, s.caller, to, until)
	var be *bot.Error
	if errors.As(err, &be) && be.Kind == bot.KindInvalid {
		return "I delegated nothing: " + be.Msg + "."
	}
	if err != nil {
		return s.failure(err, couldNotComplete, "setting a delegation")
	}
	return fmt.Sprintf("Delegated: %s decides in your name until %s, where you both may decide (never wider than either of you; one approval per person). Cards show \"%s\". `delegate off` ends it at once.",
		d.To, Stamp(d.Until), d.Line())
}

// person resolves a person as typed (a mention or a name) to a principal
// name, "" when unknown. A name is passed on as typed: the core resolves
// it, and refuses one it does not know.
func (s session) person(typed string) string {
	if id, ok := mention(typed); ok {
		return s.b.Chat().PersonOf(s.surface, id, s.user)
	}
	return strings.TrimPrefix(typed, "@")
}

// delegations lists what runs now: the caller's own delegation and what
// is lent to them.
func (s session) delegations(ctx context.Context) string {
	ds, err := s.b.Delegations().Running(ctx)
	if err != nil {
		return s.failure(err, couldNotComplete, "listing delegations")
	}
	var mine, lent []string
	for _, d := range ds {
		switch {
		case strings.EqualFold(d.From, s.caller.Name):
			mine = append(mine, d.Line())
		case strings.EqualFold(d.To, s.caller.Name):
			lent = append(lent, d.Line())
		}
	}
	var b strings.Builder
	if len(mine) == 0 {
		b.WriteString("You lend your approvals to nobody. `delegate bob until 18:00` lends them to bob until 18:00 UTC.")
	} else {
		b.WriteString("Yours: " + mine[0] + ". `delegate off` ends it.")
	}
	if len(lent) > 0 {
		b.WriteString("\nLent to you: " + strings.Join(lent, "; ") + ". You decide for them where you both may; `delegate off <name>` hands one back.")
	}
	return b.String()
}
