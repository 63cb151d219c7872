// Package chattest holds the tests of what every chat surface does the
// same way, each a table with a case per surface (Slack, Discord,
// Microsoft Teams): a pending item is posted once, to its tool's
// channel, with its buttons; an eligible click approves and the card is updated
// in place; an ineligible one (unmapped, a viewer, the requester) is
// refused privately and audited once; a replayed delivery is applied
// once; a forged one is refused; a click whose JSON repeats a key is
// refused; a destructive item takes a second confirmation; an expired
// item's buttons are gone; concurrent clicks decide once; Reject asks
// for a reason; reminders and escalations reply in the card's thread; a
// quorum shows its tally; questions are answered; a sensitive item's
// detail reaches only those who may decide it; a rate limit's wait is
// honoured and refused posts are classified; a restart still updates the
// cards posted before it.
//
// Each case drives the real adapter, with its real client library,
// against the surface's fake on 127.0.0.1 (adapters/slack/slacktest,
// adapters/discord/discordtest, adapters/teams/teamstest), in front of
// one real bot on a bbolt file with the real action tools. Where the
// surfaces differ in form (markup, where an answer is shown), the table
// says how. What only one surface does is tested in that surface's
// package.
//
// The package has no code of its own: everything is in its tests.
package chattest
