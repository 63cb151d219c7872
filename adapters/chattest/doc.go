// Package chattest holds the tests of what every chat surface does the
// same way: an eligible click approves and the card is updated in place;
// an ineligible one is refused privately and audited; a replayed delivery
// is applied once; a forged one is refused; a destructive item takes a
// second confirmation; an expired item's buttons are gone. Each test is a
// table with a case per surface (Slack, Discord, Microsoft Teams): the
// real adapter, with its real client, against the surface's fake on
// 127.0.0.1 (adapters/slack/slacktest, adapters/discord/discordtest,
// adapters/teams/teamstest), in front of one real bot on a bbolt file with
// the real action tools. What only one surface does is tested in that
// surface's package.
//
// The package has no code of its own: everything is in its tests.
package chattest
