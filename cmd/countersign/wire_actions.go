package main

import "context"

// wireActions wires action-approval tools, soft approval, ask_user, callbacks and the sweeper.
func (a *app) wireActions(ctx context.Context) error {
	return nil
}
