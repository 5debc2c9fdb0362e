// Package exlog is the logger of the example programs: stdr (the standard
// library's log package behind logr) with a verbosity per logger, since
// stdr's own verbosity is process-wide.
//
// The programs build one at start-up and hand it, named, to each nodekit
// part's Config.Log:
//
//	log := exlog.New(os.Stderr, *verbosity)
//	a, err := agent.New(agent.Config{..., Log: log.WithName("agent")})
package exlog
