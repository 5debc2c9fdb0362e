// Package podmanager holds a node agent's desired pods: every pod some
// source wants, by UID and by full name (name_namespace), and the mirror
// pods of static pods, so that a static pod and its mirror find each other
// (the kubelet's pod manager, without secrets and config maps).
//
// The sync loop's Handler stores what the sources send (AddOrUpdate,
// Remove) and translates a pod it is given into the pod to run and its
// mirror (PodAndMirror) before it calls the pod workers; the sync loop finds
// pods by UID through it (it is a syncloop.PodGetter). Pods lists the
// desired pods oldest first, the order the kubelet admits them in, from an
// order kept as pods come and go: the agent lists them for every pod it
// admits, and pods arriving one at a time (an apiserver watch) must not
// each cost a sort of all. See the Example.
package podmanager
