package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// ErrInvalidConfig is wrapped by Start for a bad Config.
var ErrInvalidConfig = errors.New("cluster: invalid config")

const (
	dirPrefix = "nodekit-e2e-"
	ownerFile = "owner.pid"
)

// sweepStaleDirs removes the working directories of clusters whose test
// binary was killed before it could clean up (its servers died with it).
func sweepStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// Config describes a cluster to start.
type Config struct {
	// Binaries are the servers to run. Required.
	Binaries Binaries
	// Dir holds certificates, etcd's data and the servers' logs. Default: a
	// new temporary directory that Stop removes.
	Dir string
	// APIServerArgs are extra kube-apiserver flags, appended to the defaults.
	APIServerArgs []string
	// ReadyTimeout bounds each server's start-up. Default 90s.
	ReadyTimeout time.Duration
	// ServiceAccountAdmission keeps the ServiceAccount admission plugin on,
	// so pods get the kube-api-access volume as in a real cluster. With no
	// controller-manager, the test creates the service accounts and the
	// kube-root-ca.crt configMaps itself. Default off: admission would
	// refuse every pod for the missing default service account.
	ServiceAccountAdmission bool
}

// Cluster is a running etcd and kube-apiserver. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg     Config
	ownDir  bool
	pki     *pki
	etcdURL string
	http    *http.Client // for readiness probes and etcd's JSON gateway

	mu         sync.Mutex
	etcd       *process
	apiservers []*APIServer // the first is the cluster's own
	serial     int64        // of the client certificates made
}

// APIServer is one kube-apiserver process of a cluster. Its methods are safe
// for concurrent use.
type APIServer struct {
	c    *Cluster
	port int

	mu   sync.Mutex
	proc *process
}

// Start runs etcd and kube-apiserver and returns once the apiserver's
// /readyz succeeds. On error everything started so far is torn down.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if err := cfg.Binaries.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 90 * time.Second
	}
	c := &Cluster{cfg: cfg}
	if c.cfg.Dir == "" {
		sweepStaleDirs()
		if c.cfg.Dir, err = os.MkdirTemp("", dirPrefix); err != nil {
			return nil, err
		}
		c.ownDir = true
		if err = os.WriteFile(filepath.Join(c.cfg.Dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.pki, err = newPKI(); err != nil {
		return nil, err
	}
	if err = c.pki.write(c.cfg.Dir); err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.pki.caCert)
	admin, err := tls.X509KeyPair(c.pki.adminCert, c.pki.adminKey)
	if err != nil {
		return nil, err
	}
	c.http = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{admin}},
			DisableKeepAlives: true, // no idle connection outlives Stop
		},
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	c.etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	if err = c.startEtcd(ctx, ports[1]); err != nil {
		return nil, err
	}
	if _, err = c.AddAPIServer(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startEtcd(ctx context.Context, peerPort int) error {
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := startProcess("etcd", c.cfg.Binaries.Etcd, []string{
		"--name=e2e",
		"--data-dir=" + filepath.Join(c.cfg.Dir, "etcd"),
		"--listen-client-urls=" + c.etcdURL,
		"--advertise-client-urls=" + c.etcdURL,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=e2e=" + peer,
		"--log-level=warn",
		"--unsafe-no-fsync=true", // throwaway data; fsync only slows the tests
	}, filepath.Join(c.cfg.Dir, "etcd.log"))
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.etcd = p
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	return p.waitReady(ctx, func(ctx context.Context) bool {
		var h struct{ Health string }
		return c.getJSON(ctx, c.etcdURL+"/health", &h) == nil && h.Health == "true"
	})
}

// AddAPIServer starts another kube-apiserver on the same etcd, on a port of
// its own; Stop stops it too. Clients of different apiservers see the same
// objects, but each apiserver has its own watch cache.
func (c *Cluster) AddAPIServer(ctx context.Context) (*APIServer, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	a := &APIServer{c: c, port: ports[0]}
	c.mu.Lock()
	c.apiservers = append(c.apiservers, a)
	c.mu.Unlock()
	return a, a.Start(ctx)
}

// APIServer returns the cluster's first apiserver.
func (c *Cluster) APIServer() *APIServer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apiservers[0]
}

// Host is the URL of the cluster's first apiserver.
func (c *Cluster) Host() string { return c.APIServer().Host() }

// RESTConfig returns a new admin (system:masters) client configuration for
// the cluster's first apiserver. Rate limits are client-go's defaults;
// callers set QPS and Burst as needed.
func (c *Cluster) RESTConfig() *rest.Config { return c.APIServer().RESTConfig() }

// Start starts the apiserver (again, after Stop) on its port and waits for
// /readyz.
func (a *APIServer) Start(ctx context.Context) error {
	a.mu.Lock()
	if a.proc != nil {
		a.mu.Unlock()
		return errors.New("cluster: kube-apiserver already running")
	}
	d, port := a.c.cfg.Dir, strconv.Itoa(a.port)
	args := append([]string{
		"--etcd-servers=" + a.c.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + port,
		"--cert-dir=" + filepath.Join(d, "apiserver-certs-"+port),
		"--tls-cert-file=" + filepath.Join(d, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(d, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(d, "ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(d, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(d, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		// as kubeadm's: the apiserver reaches kubelets (logs, exec,
		// nodes/proxy) with a client certificate of system:masters, by
		// their InternalIP first
		"--kubelet-client-certificate=" + filepath.Join(d, "apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + filepath.Join(d, "apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--allow-privileged=true",
		// The endpoint reconciler refuses a loopback advertise address.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}, a.c.cfg.APIServerArgs...)
	if !a.c.cfg.ServiceAccountAdmission {
		// No controller-manager creates the default service account, so
		// admission must not require it.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	p, err := startProcess("kube-apiserver", a.c.cfg.Binaries.APIServer, args, filepath.Join(d, "kube-apiserver-"+port+".log"))
	if err != nil {
		a.mu.Unlock()
		return err
	}
	a.proc = p
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, a.c.cfg.ReadyTimeout)
	defer cancel()
	return p.waitReady(ctx, func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Host()+"/readyz", nil)
		if err != nil {
			return false
		}
		resp, err := a.c.http.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// Stop kills the apiserver without a graceful shutdown, as a crash would;
// its clients see their connections and watches break.
func (a *APIServer) Stop() {
	a.mu.Lock()
	p := a.proc
	a.proc = nil
	a.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Restart kills the apiserver and starts it again on the same port.
func (a *APIServer) Restart(ctx context.Context) error {
	a.Stop()
	return a.Start(ctx)
}

// Host is the apiserver's URL.
func (a *APIServer) Host() string { return "https://127.0.0.1:" + strconv.Itoa(a.port) }

// RESTConfig returns a new admin (system:masters) client configuration.
// Rate limits are client-go's defaults; callers set QPS and Burst as needed.
func (a *APIServer) RESTConfig() *rest.Config {
	return &rest.Config{
		Host: a.Host(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   a.c.pki.caCert,
			CertData: a.c.pki.adminCert,
			KeyData:  a.c.pki.adminKey,
		},
	}
}

// CAFile is the cluster's CA certificate (PEM), which signs the apiserver's
// serving certificate and every client certificate: a kubelet's
// --client-ca-file.
func (c *Cluster) CAFile() string { return filepath.Join(c.cfg.Dir, "ca.crt") }

// ClientCert returns a new client certificate and key (PEM) signed by the
// cluster's CA for user in groups, as kubeadm's certificates: the
// apiserver and a kubelet given CAFile take it for that user.
func (c *Cluster) ClientCert(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	serial := c.nextSerial()
	return c.pki.sign(serial, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, time.Now())
}

// nextSerial is the serial number of the next certificate the CA signs
// after newPKI's.
func (c *Cluster) nextSerial() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serial++
	return 100 + c.serial
}

// SignServing signs a PEM CERTIFICATE REQUEST as a serving certificate
// for its subject, DNS names and IPs, valid a day, with the cluster's CA:
// what a signer of kubernetes.io/kubelet-serving does for a kubelet's
// CertificateSigningRequest.
func (c *Cluster) SignServing(csrPEM []byte) ([]byte, error) {
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("cluster: no PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	serial := c.nextSerial()
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: req.Subject, DNSNames: req.DNSNames, IPAddresses: req.IPAddresses,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, c.pki.ca, req.PublicKey, c.pki.caKey)
	if err != nil {
		return nil, err
	}
	return pemBlock("CERTIFICATE", der), nil
}

// Dir is the cluster's working directory (certificates, data, logs).
func (c *Cluster) Dir() string { return c.cfg.Dir }

// CompactEtcd compacts etcd's history up to its current revision and returns
// that revision: watches and lists at older resource versions then fail with
// 410 Gone wherever they reach etcd.
func (c *Cluster) CompactEtcd(ctx context.Context) (int64, error) {
	// etcd's JSON gateway: a range on any key reports the current revision.
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := c.postJSON(ctx, "/v3/kv/range", map[string]any{"key": "AA=="}, &rng); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster: etcd revision %q: %w", rng.Header.Revision, err)
	}
	if err := c.postJSON(ctx, "/v3/kv/compaction", map[string]any{"revision": rev, "physical": true}, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

// Stop kills both servers and removes the working directory if Start made
// it. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	apis, etcd := c.apiservers, c.etcd
	c.etcd = nil
	c.mu.Unlock()
	for _, a := range apis {
		a.Stop()
	}
	if etcd != nil {
		etcd.stop(5 * time.Second)
	}
	if c.ownDir && c.cfg.Dir != "" {
		os.RemoveAll(c.cfg.Dir)
	}
}

func (c *Cluster) getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
}

func (c *Cluster) postJSON(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.etcdURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, out)
}

func (c *Cluster) do(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cluster: %s %s: %s", req.Method, req.URL.Path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
