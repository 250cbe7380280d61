package localcluster

import (
	"bufio"
	"fmt"
	"net"
	"testing"
)

// nameServer answers every connection with its name and a newline.
func nameServer(t *testing.T, name string) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, name)
			c.Close()
		}
	}()
	return ln.Addr().String(), func() { ln.Close() }
}

func askProxy(t *testing.T, p *tcpProxy) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		return "", err
	}
	defer c.Close()
	return bufio.NewReader(c).ReadString('\n')
}

func TestProxySpreadsOverReplicasAndSkipsADeadOne(t *testing.T) {
	p, err := newTCPProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	a, stopA := nameServer(t, "a")
	b, stopB := nameServer(t, "b")
	defer stopB()
	p.addBackend(a)
	p.addBackend(b)

	seen := map[string]int{}
	for range 4 {
		got, err := askProxy(t, p)
		if err != nil {
			t.Fatal(err)
		}
		seen[got]++
	}
	if seen["a\n"] != 2 || seen["b\n"] != 2 {
		t.Errorf("with both replicas up, 4 connections went %v; want 2 each (round robin)", seen)
	}

	stopA() // replica a is killed: its port refuses connections
	for i := range 4 {
		got, err := askProxy(t, p)
		if err != nil || got != "b\n" {
			t.Errorf("connection %d after a died: %q, %v; want b", i, got, err)
		}
	}

	stopB()
	if got, err := askProxy(t, p); err == nil && got != "" {
		t.Errorf("with no replica left the proxy answered %q", got)
	}
}
