// Package schemas owns raystep's job spec and platform profile: their JSON
// Schemas (2020-12, embedded in the binary), the Go types, loading from YAML or
// JSON, --set overrides, validation (schema first, then Kubernetes and profile
// rules) and defaults.
//
// Every problem is reported, not just the first: Load returns a
// *ValidationErrors whose FieldErrors print as "FILE: /json/pointer: message".
// A spec that Load accepts is complete: defaults are applied, durations and
// quantities are parsed and WorkingDir is absolute. Turning a Spec into
// Kubernetes objects or Ray submissions is left to the runner packages.
package schemas
