//go:build race

package extender

// raceDetector: the race detector is on (it changes allocations: sync.Pool drops items at random).
const raceDetector = true
