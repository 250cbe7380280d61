package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Replicas is a Manager run as several processes behind one webhook address, as the
// pods of a Deployment are behind their Service: the API server calls the webhooks
// through a loopback proxy that spreads connections over the replicas and skips one
// that refuses them, as kube-proxy skips an endpoint that is gone.
type Replicas struct {
	// Names are the replicas' process names, <manager>-0 ... <manager>-N-1: their log
	// files, state directories and ManagerEnv keys.
	Names []string

	cluster *Cluster
	proxy   *tcpProxy
}

// StartReplicas applies m's Objects, runs n processes of m (each with its own ports and
// serving certificate, all as m's Identity, started one after another, each awaited
// ready) and registers m's webhook
// configurations, under m.Name as StartManager does, pointing at a proxy in front of
// all of them. Conversion webhooks are not supported: no replicated manager here
// serves one.
func (c *Cluster) StartReplicas(ctx context.Context, m Manager, n int) (_ *Replicas, err error) {
	if n < 1 {
		return nil, fmt.Errorf("%s: %d replicas", m.Name, n)
	}
	if len(m.ConversionCRDs) > 0 {
		return nil, fmt.Errorf("%s: replicas of a manager serving conversion webhooks are not supported", m.Name)
	}
	if err := c.installCRDs(ctx, m.CRDs); err != nil {
		return nil, fmt.Errorf("%s: install CRDs: %w", m.Name, err)
	}
	if err := c.applyObjects(ctx, m); err != nil {
		return nil, err
	}
	proxy, err := newTCPProxy()
	if err != nil {
		return nil, err
	}
	r := &Replicas{cluster: c, proxy: proxy}
	defer func() {
		if err != nil {
			_ = r.Stop()
		}
	}()
	for i := range n {
		name := fmt.Sprintf("%s-%d", m.Name, i)
		env, err := c.startInstance(ctx, name, m)
		if err != nil {
			return nil, err
		}
		r.Names = append(r.Names, name)
		proxy.addBackend(fmt.Sprintf("%s:%d", env.Host, env.WebhookPort))
	}
	base := "https://" + proxy.addr()
	if err := c.registerWebhooks(ctx, m.Name, base, m.Webhooks); err != nil {
		return nil, fmt.Errorf("%s: register webhooks: %w", m.Name, err)
	}
	c.logf("%s: %d replicas ready (webhooks on %s)", m.Name, n, base)
	return r, nil
}

// Stop stops every replica still running (SIGTERM, as a rollout would) and the proxy.
// The webhook configurations stay registered and fail until something serves them again.
func (r *Replicas) Stop() error {
	var errs []error
	for _, name := range r.Names {
		if err := r.cluster.StopManager(name); err != nil && !errors.Is(err, errNoManager) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, r.proxy.close())
	return errors.Join(errs...)
}

// KillManager SIGKILLs a manager's process group at once, as a node failure or an OOM
// kill would: no Lease release, no graceful shutdown. Its webhook registrations stay.
func (c *Cluster) KillManager(name string) error {
	victim := c.removeProcess(name)
	if victim == nil {
		return fmt.Errorf("%w %q", errNoManager, name)
	}
	return victim.kill(0)
}

// tcpProxy forwards each accepted loopback connection to one backend, round robin,
// passing TLS through untouched: the replicas' serving certificates are for 127.0.0.1,
// the proxy's address too.
type tcpProxy struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
	done     chan struct{}
	wg       sync.WaitGroup
}

func newTCPProxy() (*tcpProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &tcpProxy{ln: ln, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) addBackend(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = append(p.backends, addr)
}

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(in)
		}()
	}
}

// dial connects to the next backend that accepts, trying each at most once.
func (p *tcpProxy) dial() (net.Conn, error) {
	p.mu.Lock()
	backends := append([]string(nil), p.backends...)
	start := p.next
	p.next++
	p.mu.Unlock()
	var errs []error
	for i := range backends {
		addr := backends[(start+i)%len(backends)]
		out, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return out, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no backend accepts: %w", errors.Join(errs...))
}

func (p *tcpProxy) forward(in net.Conn) {
	out, err := p.dial()
	if err != nil {
		in.Close()
		return
	}
	if !p.track(in, out) {
		in.Close()
		out.Close()
		return
	}
	defer p.untrack(in, out)
	copied := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// A half-closed side ends the exchange: a killed backend must not leave the API
		// server waiting on a connection nothing answers any more.
		dst.Close()
		src.Close()
		copied <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-copied
	<-copied
}

func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *tcpProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// close stops accepting, cuts every open connection and waits for the forwarders.
func (p *tcpProxy) close() error {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return nil
	default:
	}
	close(p.done)
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}
