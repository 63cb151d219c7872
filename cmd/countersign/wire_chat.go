package main

import "context"

// wireChat wires the chat commands and the chat directory.
func (a *app) wireChat(ctx context.Context) error {
	return nil
}
