package cg

// SetRelayoutStep has f run before each step of a relayout, failing the
// step with its error; with crash, a failed relayout leaves what it made
// in place, as one whose process died would. For the external tests.
func SetRelayoutStep(f func(step string) error, crash bool) { relayoutStep, relayoutCrash = f, crash }
