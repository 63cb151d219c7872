// Command countersign is a chat-ops approval bot for AI agents: an agent
// memory with deterministic safety gates, an approval queue decided from
// Slack, Discord, Microsoft Teams and the web console, an HTTP and MCP tool
// API, host hooks and a signed audit chain.
//
// `countersign help` prints its commands and their flags (usage, in
// run.go: the one copy, checked against each command's flags by
// TestUsageNamesEveryFlag); docs/ describes each.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errExit1) { // errExit1: the command already said why
			fmt.Fprintln(os.Stderr, "countersign:", err)
		}
		os.Exit(1)
	}
}
