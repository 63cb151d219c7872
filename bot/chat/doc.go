// Package chat is the surface-neutral decision layer: what a person does
// from a chat surface (or the web console), taken the same way whichever
// surface reported it.
//
// Decide takes a decision as a surface reports it (surface, platform user
// id and roles, delivery ids, item id, verb, reason or choices) and does
// all of it: dedupe, identity mapping through the bot's chat directory
// (the principal's role and scopes), the item loaded once, the scope
// check, the decision through bot.Call (the same tool call, one decision
// rule and audit entry as an API client's), and the outcome to render.
// Prepare and Details run the same checks for a reason form and for a
// sensitive item's detail. The adapters only verify signatures, parse
// payloads and render an item or an Outcome.
//
// The vocabulary every renderer shares (status words, kind nouns, the
// recorded-outcome sentence, the time format, text sanitising) is in
// vocab.go.
package chat
