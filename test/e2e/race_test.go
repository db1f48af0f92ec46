//go:build race

package e2e

// raceEnabled: the tests run with the race detector, so the binary they
// drive is built with it too.
const raceEnabled = true
