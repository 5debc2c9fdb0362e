package syncloop_test

import goruntime "runtime"

// gosched yields while a test waits for the loop to register its tickers on
// the fake clock (FakeClock offers no channel for that).
func gosched() { goruntime.Gosched() }
