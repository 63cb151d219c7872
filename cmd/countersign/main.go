// Command countersign is a chat-ops approval bot for AI agents: an agent
// memory with deterministic safety gates, an approval queue decided from
// Slack and Discord, an HTTP and MCP tool API, and a signed audit chain.
//
// Usage:
//
//	countersign init [--config FILE]
//	countersign serve [--config FILE] [--listen ADDR]
//	countersign ready [--config FILE] [--url URL] [--timeout 30s]
//	countersign call [--config FILE] [--url URL] [--key KEY] [--json | --field NAME] TOOL [JSON_ARGS]
//	countersign keys create [--config FILE] --name NAME --role ROLE [--scopes a,b]
//	countersign mcp [--config FILE] [--key KEY | --local-agent]
//	countersign hook claude-code [--config FILE] [--key KEY] [--url URL] [--pubkey HEX]
//	countersign audit verify|anchor|archive|export|pubkey [--config FILE]
//	countersign store compact [--config FILE]
//	countersign store backup --to FILE [--url URL] [--key KEY]
//	countersign store restore --from FILE [--config FILE]
//	countersign version [--short]
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
