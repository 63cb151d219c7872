package main

import "context"

// wireSlack wires the Slack adapter.
func (a *app) wireSlack(ctx context.Context) error {
	return nil
}
