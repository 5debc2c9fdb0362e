package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sample is one reading of the agent process.
type sample struct {
	at     time.Time
	cpuSec float64 // user+system since the process started
	rss    int64   // bytes
}

// clockTicks is USER_HZ, 100 on every Linux the kernel's ABI allows.
const clockTicks = 100

func readProc(pid int) (sample, error) {
	s := sample{at: time.Now()}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// fields after the command's closing parenthesis; utime and stime are
	// the 14th and 15th of the whole line
	str := string(b)
	i := strings.LastIndexByte(str, ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(str[i+1:])
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	s.cpuSec = (ut + st) / clockTicks
	st2, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer st2.Close()
	sc := bufio.NewScanner(st2)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return s, fmt.Errorf("/proc/%d/status: VmRSS %q", pid, v)
			}
			s.rss = kb << 10
		}
	}
	return s, sc.Err()
}

// sampler reads the agent every interval until ctx ends.
type sampler struct {
	mu      sync.Mutex
	samples []sample
	err     error
}

func (s *sampler) run(ctx context.Context, pid int, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		x, err := readProc(pid)
		s.mu.Lock()
		if err != nil {
			s.err = err
		} else {
			s.samples = append(s.samples, x)
		}
		s.mu.Unlock()
		if err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// usage is CPU-seconds in [from, to], peak RSS over the whole run and the
// median RSS of [from, to]'s second half (steady).
func (s *sampler) usage(from, to time.Time) (cpu float64, peak, steady int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, 0, 0, s.err
	}
	var first, last *sample
	var half []int64
	mid := from.Add(to.Sub(from) / 2)
	for i := range s.samples {
		x := &s.samples[i]
		if x.rss > peak {
			peak = x.rss
		}
		if x.at.Before(from) || x.at.After(to) {
			continue
		}
		if first == nil {
			first = x
		}
		last = x
		if !x.at.Before(mid) {
			half = append(half, x.rss)
		}
	}
	if first == nil {
		return 0, 0, 0, fmt.Errorf("no samples between %s and %s", from, to)
	}
	sort.Slice(half, func(i, j int) bool { return half[i] < half[j] })
	if len(half) > 0 {
		steady = half[len(half)/2]
	}
	return last.cpuSec - first.cpuSec, peak, steady, nil
}

// auditEvent is what the count needs of an audit.k8s.io/v1 Event.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// auditCounts counts user's requests received in [from, to] in the audit
// log at path, by "verb resource[/subresource]" (a request once, whatever
// its stages).
func auditCounts(path, user string, from, to time.Time) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), user) {
			continue
		}
		var e auditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		if e.User.Username != user || seen[e.AuditID] || e.RequestReceived.Before(from) || e.RequestReceived.After(to) {
			continue
		}
		seen[e.AuditID] = true
		what := e.RequestURI
		if e.ObjectRef != nil {
			what = e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				what += "/" + e.ObjectRef.Subresource
			}
		} else if i := strings.IndexByte(what, '?'); i >= 0 {
			what = what[:i]
		}
		out[e.Verb+" "+what]++
	}
	return out, sc.Err()
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func diff(after, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
