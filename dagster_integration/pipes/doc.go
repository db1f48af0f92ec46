// Package pipes is the external-process side of the Dagster Pipes protocol.
//
// A Go program started by Dagster (for example through PipesSubprocessClient)
// opens a Session with Open. The session reads the bootstrap Dagster passed in
// DAGSTER_PIPES_CONTEXT / DAGSTER_PIPES_MESSAGES (or the
// --dagster-pipes-context / --dagster-pipes-messages arguments), loads the
// typed Context, sends "opened", and then lets the program log, report asset
// materializations, asset checks, custom messages and external streams, and
// finally "closed" (with the exception when the program failed).
//
// Every message is validated against what Dagster's message handler accepts
// before a single byte is written: one malformed line stops Dagster's reader
// thread and silently drops every later message, so an invalid message is an
// error returned to the caller instead. Floats are always written as floats
// (2.0, never 2) so that "float" metadata stays a float in Dagster.
//
// A process not launched by Dagster gets an inactive session: every call
// succeeds and writes nothing, so the same program also runs standalone.
//
// The package also carries what a program needs to act as an intermediary:
// EncodeBootstrap and the params helpers build a bootstrap for a child process
// (for example a Python driver using the dagster-pipes package with its
// messages on stdout), and Relay splits that child's output into plain lines,
// passed through untouched, and Pipes messages, parsed, validated and handed
// to a callback that may amend them and Forward them to Dagster.
//
// This package does not start processes, talk to Ray or decide exit codes;
// those belong to its callers.
package pipes
