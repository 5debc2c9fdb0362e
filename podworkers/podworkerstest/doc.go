// Package podworkerstest holds fakes for testing with package podworkers:
// Syncer, a recording podworkers.PodSyncer with programmable results, and
// Cache, a runtime.Cache that never makes a worker wait.
//
// Where they differ from the real thing: Syncer does nothing but record and
// return what it was told; it never blocks unless a Fn override does. Cache
// answers GetNewerThan at once with whatever it holds, so a worker may act on
// status no newer than its last sync, which the real Cache prevents.
package podworkerstest
