//go:build race

package broker

// raceEnabled: the race detector slows CPU-bound tests five to ten times;
// the largest ones scale their load down under it.
const raceEnabled = true
