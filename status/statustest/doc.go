// Package statustest holds an in-memory fake of the apiserver's pod client,
// for testing the status manager (and anything else that reads and patches
// pods) without an apiserver.
//
// A Fake stores pods by namespace and name. Fake.Pods(namespace) returns a
// client whose Get, Patch, UpdateStatus, Create and Delete have the signatures of
// client-go's typed CoreV1().Pods(namespace), so it fills status.Config's
// PodClient:
//
//	f := statustest.New(pod)
//	m, _ := status.NewManager(status.Config{
//		PodClient: func(ns string) status.PodClient { return f.Pods(ns) },
//	})
//	...
//	f.Count(statustest.VerbPatch) // how many status patches were sent
//
// Every call is recorded as an Action. InjectError makes the next call of a
// verb fail (for example with apierrors.NewConflict), and WaitForActions lets
// a test wait for a background sync without sleeping. The Fake is safe for
// concurrent use.
//
// Where it differs from a real apiserver:
//   - Patch supports only the status subresource and strategic-merge
//     patches, and of those only what a status patch needs: scalar fields are
//     replaced, null removes a field, lists with a merge key (conditions by
//     type, podIPs and hostIPs by ip) are merged element by element with
//     "$patch": "delete" and "$patch": "replace" honoured, other lists are
//     replaced. metadata.uid in the patch is checked as a precondition and a
//     mismatch answers Conflict, as the apiserver does.
//   - UpdateStatus needs the stored pod's resourceVersion (a mismatch
//     answers Conflict) and takes the status, labels, annotations,
//     finalizers and generateName from the pod it is given (as the
//     apiserver, which keeps only spec, ownerReferences and
//     deletionTimestamp of the stored pod); nothing is defaulted or
//     validated.
//   - Create assigns a UID ("fake-uid-N") and resourceVersion, sets phase
//     Pending and keeps the rest of the status empty; nothing is defaulted or
//     validated, and no admission (for example NodeRestriction) runs.
//   - Delete with a grace period of 0 removes the pod at once; any other
//     grace period only sets deletionTimestamp. A UID precondition that does
//     not match answers Conflict.
//   - There is no watch and no list.
package statustest
