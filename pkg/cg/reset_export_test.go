package cg

import "time"

// SetResetHook has f called once consumers are reset, before they are
// resumed (nil: no call), for the external tests.
func SetResetHook(f func()) { resetHook = f }

// SetResetDrainMax sets how long a reset waits for instances to settle.
func SetResetDrainMax(d time.Duration) func() {
	old := resetDrainMax
	resetDrainMax = d
	return func() { resetDrainMax = old }
}
