package status

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// The sync workers. A changed status is queued (enqueue) and a worker
// sends it as soon as one is free: no pod waits for a batch of others to
// finish, nor for a pass over every pod, and pods are sent in the order
// their statuses changed. A pod is synced by one worker (or the periodic
// batch) at a time; a change that lands meanwhile queues it again once the
// sync in progress ends.
//
// Workers are started when pods are queued, up to SyncWorkers, and end
// when the queue has nothing for them: an idle Manager has none. Standing
// workers cost each agent SyncWorkers goroutines that wait almost always
// (8,000 goroutines for a process of 1,000 simulated nodes).

// enqueue queues uid for a sync worker, once however often it changes
// before a worker takes it. Without a pod client nothing is sent and
// nothing is queued.
func (m *Manager) enqueue(uid types.UID) {
	if m.client == nil {
		return
	}
	m.qmu.Lock()
	defer m.qmu.Unlock()
	if m.queued[uid] {
		return
	}
	m.queued[uid] = true
	if !m.busy[uid] {
		m.queue = append(m.queue, uid)
		m.spawnLocked()
	}
}

// spawnLocked starts a worker for the queue if Run runs and fewer than
// SyncWorkers do. Callers hold qmu.
func (m *Manager) spawnLocked() {
	if m.workCtx == nil || m.stopping || m.workers >= m.syncWorkers || len(m.queue) == 0 {
		return
	}
	m.workers++
	ctx := m.workCtx
	m.workerWG.Go(func() { m.work(ctx) })
}

// startWorkers lets enqueue start workers from now on, with ctx, and
// starts them for what was queued before.
func (m *Manager) startWorkers(ctx context.Context) {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	m.workCtx = ctx
	for range min(m.syncWorkers, len(m.queue)) {
		m.spawnLocked()
	}
}

// next claims the first queued pod that nobody is syncing; false, and
// the caller's worker is counted out, when there is none or the workers
// stop.
func (m *Manager) next() (types.UID, bool) {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	for !m.stopping && len(m.queue) > 0 {
		uid := m.queue[0]
		m.queue[0] = ""
		m.queue = m.queue[1:]
		if len(m.queue) == 0 {
			m.queue = nil
		}
		// Busy: its release queues it again. Not queued: a duplicate
		// left by a release, already taken.
		if m.busy[uid] || !m.queued[uid] {
			continue
		}
		delete(m.queued, uid)
		m.busy[uid] = true
		return uid, true
	}
	m.workers--
	return "", false
}

// tryClaim claims uid for the periodic batch unless it is being synced.
func (m *Manager) tryClaim(uid types.UID) bool {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	if m.busy[uid] {
		return false
	}
	m.busy[uid] = true
	return true
}

// release ends a sync of uid, queueing it again if it changed meanwhile.
func (m *Manager) release(uid types.UID) {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	delete(m.busy, uid)
	if m.queued[uid] {
		m.queue = append(m.queue, uid)
		m.spawnLocked()
	}
}

// stopWorkers makes every worker end after its current sync and starts no
// more, then waits for them.
func (m *Manager) stopWorkers() {
	m.qmu.Lock()
	m.stopping = true
	m.qmu.Unlock()
	m.workerWG.Wait()
}

// work is one sync worker: it sends queued pods' statuses until the
// queue has none for it or the workers stop.
func (m *Manager) work(ctx context.Context) {
	for {
		uid, ok := m.next()
		if !ok {
			return
		}
		if vs := m.pending(uid); vs != nil && ctx.Err() == nil {
			m.syncPod(ctx, uid, vs)
		}
		m.release(uid)
	}
}

// pending returns uid's status if the apiserver does not have its
// version yet, else nil.
func (m *Manager) pending(uid types.UID) *versionedStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs, ok := m.statuses[uid]
	if !ok {
		return nil
	}
	apiUID := uid
	if mr, ok := m.mirrors[uid]; ok {
		apiUID = mr.uid
	}
	m.apiMu.Lock()
	defer m.apiMu.Unlock()
	if m.apiVersions[apiUID] >= vs.version {
		return nil
	}
	return vs
}

// deleteOrphans deletes the mirror pods whose static pods are gone.
func (m *Manager) deleteOrphans(ctx context.Context) {
	m.mu.Lock()
	orphans := m.orphans
	m.orphans = nil
	m.mu.Unlock()
	for _, o := range orphans {
		m.deleteOrphan(ctx, o)
	}
}
