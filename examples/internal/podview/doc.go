// Package podview prints the live view of the example programs: a table of
// pods, their phases and their containers (state, restarts), printed again
// only when it changes.
//
// It sits beside the agent, not in its data path: it polls a function such as
// agent.Agent.Pods, which returns copies carrying the generated API status.
//
//	v, _ := podview.New(podview.Config{Out: os.Stdout, Pods: a.Pods})
//	err := v.Follow(func() error { return a.Run(ctx) }) // a frame on every change, polled every 500ms
package podview
