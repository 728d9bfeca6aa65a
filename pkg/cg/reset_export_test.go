package cg

// SetResetHook has f called once consumers are reset, before they are
// resumed (nil: no call), for the external tests.
func SetResetHook(f func()) { resetHook = f }
