package main

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"time"
)

type window struct{ from, to time.Time }

type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	Stage     string `json:"stage"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	Received time.Time `json:"requestReceivedTimestamp"`
}

// countAudit counts the requests of user agents starting with ua in each
// window (by the time the apiserver received them), by "verb resource"
// and in all ("total").
func countAudit(path, ua string, ws []window) ([]map[string]int, error) {
	out := make([]map[string]int, len(ws))
	for i := range out {
		out[i] = map[string]int{}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e auditEvent
		if json.Unmarshal(line, &e) != nil || e.Stage != "ResponseComplete" || !strings.HasPrefix(e.UserAgent, ua) {
			continue
		}
		key := e.Verb
		if e.ObjectRef != nil {
			key += " " + e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				key += "/" + e.ObjectRef.Subresource
			}
		}
		for i, w := range ws {
			if !e.Received.Before(w.from) && e.Received.Before(w.to) {
				out[i][key]++
				out[i]["total"]++
			}
		}
	}
	return out, sc.Err()
}
