//go:build !race

package e2e

// raceEnabled: the tests run without the race detector, and so does the
// binary they drive.
const raceEnabled = false
