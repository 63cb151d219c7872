package main

import "context"

// wireDiscord wires the Discord adapter.
func (a *app) wireDiscord(ctx context.Context) error {
	return nil
}
