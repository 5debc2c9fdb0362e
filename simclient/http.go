package simclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
)

// request is a resource request's parts.
type request struct {
	res           *resource
	ns, name, sub string
}

// ServeHTTP serves the API: discovery, and per resource get, list, watch
// (with watch-list), create, update, patch, delete and deletecollection,
// and the status, scale, binding, eviction and log subresources.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		body = b
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if handled := s.discovery(w, parts); handled {
		return
	}
	rq, err := s.route(parts)
	if err != nil {
		writeError(w, err)
		return
	}
	q := req.URL.Query()
	switch {
	case req.Method == http.MethodGet && rq.name == "":
		if b, _ := strconv.ParseBool(q.Get("watch")); b {
			s.serveWatch(w, req, rq, q)
			return
		}
		s.serveList(w, rq, q)
	case req.Method == http.MethodGet:
		s.serveGet(w, rq)
	case req.Method == http.MethodPost && rq.name == "":
		obj, err := s.decode(rq.res, body)
		if err == nil {
			obj, err = s.create(rq.res, rq.ns, obj)
		}
		writeResult(w, http.StatusCreated, rq.res, obj, err)
	case req.Method == http.MethodPost:
		s.servePodAction(w, rq, body)
	case req.Method == http.MethodPut:
		s.serveUpdate(w, rq, body)
	case req.Method == http.MethodPatch:
		pt := types.PatchType(strings.TrimSpace(strings.Split(req.Header.Get("Content-Type"), ";")[0]))
		if rq.sub == "scale" {
			s.serveScalePatch(w, rq, pt, body)
			return
		}
		if rq.sub != "" && rq.sub != "status" {
			writeError(w, notFound(rq.res, rq.name+"/"+rq.sub))
			return
		}
		obj, err := s.patch(rq.res, rq.ns, rq.name, pt, body, rq.sub)
		writeResult(w, http.StatusOK, rq.res, obj, err)
	case req.Method == http.MethodDelete:
		opts, err := deleteOptions(body, q)
		if err != nil {
			writeError(w, err)
			return
		}
		if rq.name == "" {
			s.serveDeleteCollection(w, rq, q, opts)
			return
		}
		obj, err := s.del(rq.res, rq.ns, rq.name, opts)
		writeResult(w, http.StatusOK, rq.res, obj, err)
	default:
		writeError(w, apierrors.NewMethodNotSupported(rq.res.gvr.GroupResource(), req.Method))
	}
}

// route finds a request's resource, namespace, name and subresource.
func (s *Server) route(parts []string) (request, error) {
	var gv schema.GroupVersion
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		gv, rest = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, rest = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return request{}, apierrors.NewNotFound(schema.GroupResource{}, strings.Join(parts, "/"))
	}
	var rq request
	if rest[0] == "namespaces" && len(rest) >= 3 && !(len(rest) == 3 && (rest[2] == "status" || rest[2] == "finalize")) {
		rq.ns, rest = rest[1], rest[2:]
	}
	if len(rest) > 3 {
		return rq, apierrors.NewNotFound(schema.GroupResource{}, strings.Join(parts, "/"))
	}
	gvr := gv.WithResource(rest[0])
	s.mu.Lock()
	rq.res = s.resources[gvr]
	s.mu.Unlock()
	if rq.res == nil {
		return rq, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	if len(rest) > 1 {
		rq.name = rest[1]
	}
	if len(rest) > 2 {
		rq.sub = rest[2]
	}
	if rq.res.namespaced && rq.ns == "" && rq.name != "" || !rq.res.namespaced && rq.ns != "" {
		return rq, apierrors.NewNotFound(gvr.GroupResource(), rq.name)
	}
	return rq, nil
}

func (s *Server) serveGet(w http.ResponseWriter, rq request) {
	switch rq.sub {
	case "", "status":
		obj, err := s.get(rq.res, rq.ns, rq.name)
		writeResult(w, http.StatusOK, rq.res, obj, err)
	case "scale":
		sc, err := s.scale(rq)
		writeAny(w, http.StatusOK, sc, err)
	case "log":
		if rq.res.gvr != podsGVR {
			writeError(w, notFound(rq.res, rq.name+"/log"))
			return
		}
		if _, err := s.get(rq.res, rq.ns, rq.name); err != nil {
			writeError(w, err)
			return
		}
		// The in-memory runtime keeps no logs: an empty one.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
	default:
		writeError(w, notFound(rq.res, rq.name+"/"+rq.sub))
	}
}

func (s *Server) serveUpdate(w http.ResponseWriter, rq request, body []byte) {
	switch rq.sub {
	case "", "status":
		obj, err := s.decode(rq.res, body)
		if err == nil {
			obj, err = s.update(rq.res, rq.ns, rq.name, obj, rq.sub)
		}
		writeResult(w, http.StatusOK, rq.res, obj, err)
	case "scale":
		var sc autoscalingv1.Scale
		if err := json.Unmarshal(body, &sc); err != nil {
			writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		out, err := s.setScale(rq, &sc)
		writeAny(w, http.StatusOK, out, err)
	default:
		writeError(w, notFound(rq.res, rq.name+"/"+rq.sub))
	}
}

// servePodAction is a pod's binding and eviction.
func (s *Server) servePodAction(w http.ResponseWriter, rq request, body []byte) {
	if rq.res.gvr != podsGVR {
		writeError(w, apierrors.NewMethodNotSupported(rq.res.gvr.GroupResource(), "create "+rq.sub))
		return
	}
	switch rq.sub {
	case "binding":
		var b corev1.Binding
		if err := json.Unmarshal(body, &b); err != nil {
			writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		if b.Name == "" {
			b.Name = rq.name
		}
		if b.Name != rq.name {
			writeError(w, apierrors.NewBadRequest("binding name does not match the pod's"))
			return
		}
		err := s.store.Pods(rq.ns).Bind(s.ctx, &b, metav1.CreateOptions{})
		writeAny(w, http.StatusCreated, &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}, err)
	case "eviction":
		var ev policyv1.Eviction
		if err := json.Unmarshal(body, &ev); err != nil {
			writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		var opts metav1.DeleteOptions
		if ev.DeleteOptions != nil {
			opts = *ev.DeleteOptions
		}
		if err := s.disruptionAllowed(rq.ns, rq.name); err != nil {
			writeError(w, err)
			return
		}
		_, err := s.del(rq.res, rq.ns, rq.name, opts)
		writeAny(w, http.StatusCreated, &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}, err)
	default:
		writeError(w, apierrors.NewMethodNotSupported(rq.res.gvr.GroupResource(), "create "+rq.sub))
	}
}

// selection parses a list's or watch's selectors; a field the kind cannot
// be selected by is a bad request, as the apiserver's.
func (s *Server) selection(rq request, q url.Values) (*filter, error) {
	f := &filter{namespace: rq.ns, labels: labels.Everything(), fields: fields.Everything(), fieldsOf: fieldsOf}
	var err error
	if v := q.Get("labelSelector"); v != "" {
		if f.labels, err = labels.Parse(v); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	if v := q.Get("fieldSelector"); v != "" {
		if f.fields, err = fields.ParseSelector(v); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		sample, err := s.newObject(rq.res)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		known := fieldsOf(sample)
		for _, r := range f.fields.Requirements() {
			if _, ok := known[r.Field]; !ok {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
			}
		}
	}
	return f, nil
}

func (s *Server) serveList(w http.ResponseWriter, rq request, q url.Values) {
	f, err := s.selection(rq, q)
	if err != nil {
		writeError(w, err)
		return
	}
	s.mu.Lock()
	t := s.tables[rq.res.gvr]
	items := t.list(f)
	rv := s.listRV(t)
	s.mu.Unlock()
	out := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ListMeta   `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}{rq.res.gvk.GroupVersion().String(), rq.res.gvk.Kind + "List", metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}, []json.RawMessage{}}
	for _, o := range items {
		b, err := json.Marshal(withKind(o, rq.res))
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		out.Items = append(out.Items, b)
	}
	writeAny(w, http.StatusOK, out, nil)
}

// serveWatch streams a watch. sendInitialEvents=true is a watch-list:
// every selected object as Added, then a bookmark annotated
// k8s.io/initial-events-end, then the changes; without a resourceVersion
// (or "0") the current objects come as Added first; from a resourceVersion
// the changes after it, or 410 Gone if history no longer reaches back.
func (s *Server) serveWatch(w http.ResponseWriter, req *http.Request, rq request, q url.Values) {
	f, err := s.selection(rq, q)
	if err != nil {
		writeError(w, err)
		return
	}
	wt := newWatcher(f)
	rv := q.Get("resourceVersion")
	s.mu.Lock()
	t := s.tables[rq.res.gvr]
	switch initial, _ := strconv.ParseBool(q.Get("sendInitialEvents")); {
	case initial:
		for _, o := range t.list(f) {
			wt.push(event{typ: watch.Added, obj: o})
		}
		ev := bookmark(s.listRV(t))
		ev.initialEnd = true
		wt.push(ev)
	case rv == "" || rv == "0":
		for _, o := range t.list(f) {
			wt.push(event{typ: watch.Added, obj: o})
		}
	default:
		from, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			s.mu.Unlock()
			writeError(w, apierrors.NewBadRequest("invalid resourceVersion "+rv))
			return
		}
		if from < t.histFrom {
			s.mu.Unlock()
			writeError(w, apierrors.NewResourceExpired("too old resource version: "+rv))
			return
		}
		for _, ev := range t.history {
			if ev.rv > from {
				wt.send(ev)
			}
		}
	}
	t.watchers[wt] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(t.watchers, wt)
		s.mu.Unlock()
		wt.stop()
	}()
	// timeoutSeconds is ignored: a watch lasts until the client stops it.
	// Ending it would change nothing a client sees but for the time its
	// re-watch takes, and client-go takes a watch that ended in under a
	// second of wall time without events for a failure and relists after
	// a back-off on the wall clock, while virtual time runs on.
	var gone <-chan struct{}
	if pr, ok := w.(*pipeResponse); ok {
		gone = pr.gone
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for {
		for _, ev := range wt.take() {
			if err := enc.Encode(s.watchEvent(rq.res, ev)); err != nil {
				return
			}
		}
		select {
		case <-wt.wake:
		case <-wt.done:
			return
		case <-gone:
			return
		case <-req.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// watchEvent is ev as metav1.WatchEvent's JSON.
func (s *Server) watchEvent(r *resource, ev event) any {
	var obj runtime.Object
	if ev.typ == watch.Bookmark {
		o, _ := s.newObject(r)
		m := objectMeta(o)
		m.SetResourceVersion(strconv.FormatUint(ev.rv, 10))
		if ev.initialEnd {
			m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
		o.GetObjectKind().SetGroupVersionKind(r.gvk)
		obj = o
	} else {
		obj = withKind(ev.obj, r)
	}
	return struct {
		Type   watch.EventType `json:"type"`
		Object runtime.Object  `json:"object"`
	}{ev.typ, obj}
}

func (s *Server) serveDeleteCollection(w http.ResponseWriter, rq request, q url.Values, opts metav1.DeleteOptions) {
	f, err := s.selection(rq, q)
	if err != nil {
		writeError(w, err)
		return
	}
	s.mu.Lock()
	items := s.tables[rq.res.gvr].list(f)
	s.mu.Unlock()
	for _, o := range items {
		m := objectMeta(o)
		if _, err := s.del(rq.res, m.GetNamespace(), m.GetName(), opts); err != nil && !apierrors.IsNotFound(err) {
			writeError(w, err)
			return
		}
	}
	writeAny(w, http.StatusOK, &metav1.Status{Status: metav1.StatusSuccess}, nil)
}

func deleteOptions(body []byte, q url.Values) (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &opts); err != nil {
			return opts, apierrors.NewBadRequest(err.Error())
		}
	}
	if v := q.Get("gracePeriodSeconds"); v != "" {
		g, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return opts, apierrors.NewBadRequest("invalid gracePeriodSeconds " + v)
		}
		opts.GracePeriodSeconds = &g
	}
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	return opts, nil
}

// --- discovery

// discovery serves /version, /api, /apis and the resource lists of each
// group version; it reports whether the path was one of them.
func (s *Server) discovery(w http.ResponseWriter, parts []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	groups := sortedGroups(s.resources)
	switch {
	case len(parts) == 1 && parts[0] == "version":
		writeAny(w, http.StatusOK, version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.0-nodekit-sim", Platform: "sim"}, nil)
	case len(parts) == 1 && parts[0] == "api":
		writeAny(w, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}, nil)
	case len(parts) == 1 && parts[0] == "apis":
		l := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
		for _, gv := range groups {
			if gv.Group == "" {
				continue
			}
			gvd := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
			if n := len(l.Groups); n > 0 && l.Groups[n-1].Name == gv.Group {
				l.Groups[n-1].Versions = append(l.Groups[n-1].Versions, gvd)
				l.Groups[n-1].PreferredVersion = gvd
				continue
			}
			l.Groups = append(l.Groups, metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{gvd}, PreferredVersion: gvd})
		}
		writeAny(w, http.StatusOK, l, nil)
	case len(parts) == 2 && parts[0] == "api":
		return s.resourceList(w, schema.GroupVersion{Version: parts[1]}, groups)
	case len(parts) == 3 && parts[0] == "apis":
		return s.resourceList(w, schema.GroupVersion{Group: parts[1], Version: parts[2]}, groups)
	default:
		return false
	}
	return true
}

func (s *Server) resourceList(w http.ResponseWriter, gv schema.GroupVersion, groups []schema.GroupVersion) bool {
	if !slices.Contains(groups, gv) {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group}, gv.Version))
		return true
	}
	l := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	verbs := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	for gvr, r := range s.resources {
		if gvr.GroupVersion() != gv {
			continue
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: gvr.Resource, Namespaced: r.namespaced, Kind: r.gvk.Kind, Verbs: verbs})
		if r.status {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: gvr.Resource + "/status", Namespaced: r.namespaced, Kind: r.gvk.Kind, Verbs: metav1.Verbs{"get", "patch", "update"}})
		}
		if r.scale {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: gvr.Resource + "/scale", Namespaced: r.namespaced, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get", "patch", "update"}})
		}
	}
	slices.SortFunc(l.APIResources, func(a, b metav1.APIResource) int { return strings.Compare(a.Name, b.Name) })
	writeAny(w, http.StatusOK, l, nil)
	return true
}

// --- responses

func writeResult(w http.ResponseWriter, code int, r *resource, obj runtime.Object, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	if st, ok := obj.(*metav1.Status); ok {
		writeAny(w, code, st, nil)
		return
	}
	writeAny(w, code, withKind(obj, r), nil)
}

func writeAny(w http.ResponseWriter, code int, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	if st, ok := v.(*metav1.Status); ok {
		st.Kind, st.APIVersion = "Status", "v1"
	}
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	b, _ := json.Marshal(&s)
	w.Header().Set("Content-Type", "application/json")
	code := int(s.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
