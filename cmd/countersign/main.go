// Command countersign is a chat-ops approval bot for AI agents: an agent
// memory with deterministic safety gates, an approval queue decided from
// Slack and Discord, an HTTP and MCP tool API, and a signed audit chain.
//
// Usage:
//
//	countersign serve [--config FILE]
//	countersign keys create [--config FILE] --name NAME --role ROLE [--scopes a,b]
//	countersign mcp [--config FILE] [--key KEY]
//	countersign audit verify|export|pubkey [--config FILE]
//	countersign version
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "countersign:", err)
		os.Exit(1)
	}
}
