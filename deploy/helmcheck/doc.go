// Package helmcheck renders Countersign's Helm chart (deploy/helm/countersign)
// with the Helm Go SDK, as `helm template` does, and checks its objects: its
// tests are the chart's checks in CI. It is a module of its own, so that
// Helm and the Kubernetes API types never enter the countersign binary's
// dependencies (bench/ is kept apart the same way).
package helmcheck
