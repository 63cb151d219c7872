// Package policy holds Countersign's pure rules: which role grants which
// capability, the safety verdict over facts, how a tool's category maps to
// the mechanics of its approval, the soft-approval modes, and the one rule
// for who may decide (Decide). The chat scope gate lives with the
// chat commands that use it, in bot/chat. Nothing here does I/O or reads a
// clock: every function is a deterministic function of its arguments, so
// no text in a request can change what a gate computes.
package policy
