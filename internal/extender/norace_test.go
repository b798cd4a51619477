//go:build !race

package extender

const raceDetector = false
