// Package config is the schema of config.yaml and its strict decoding.
//
// Load reads a file (or the embedded default, countersign.DefaultConfig)
// and Parse a document whose relative paths resolve against a directory.
// Both decode strictly: an unknown key, a value of the wrong type or shape,
// and every semantic problem (a missing key, a value out of range, a name
// another section does not declare, a CEL condition that does not compile)
// is reported, all at once, as one "key: problem" line each, the key being
// the path a reader finds in the file (http.rate_burst,
// tools[2].approvers.roles[0]). Defaults are filled in before validation,
// validation reads no file, and the files the config names (the slot
// schema) are read last. Secrets are never in the file, only the names of
// the environment variables that hold them.
//
// One type per section holds its keys with their defaults and validate
// methods; the methods cmd/countersign wires with (ToolConfig.Spec,
// StepUpConfig.Spec, GatewayConfig.Lookup, Config.Rotations…) turn a
// section into the options of the package it configures. Only
// cmd/countersign imports config: libraries take their options as
// arguments.
package config
