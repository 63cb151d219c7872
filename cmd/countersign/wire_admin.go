package main

import "context"

// wireAdmin wires the administration and accountability tools, MCP and HTTP hardening.
func (a *app) wireAdmin(ctx context.Context) error {
	return nil
}
