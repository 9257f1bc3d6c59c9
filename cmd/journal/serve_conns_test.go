//go:build linux

package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServe_IdleKeepAliveFloodLeavesRoomForOthers is the attack of issue
// 27: a serve process allowed 300 open files, one unauthenticated client
// opening many more keep-alive connections than that (each with a cheap
// GET /healthz, then idle), and a normal request from another address. The
// flood gets its per-address share, every further connection is answered
// 503 with Retry-After rather than left unaccepted, the other client is
// served, and the episode is logged once. Before the bound, the flood took
// every descriptor and the other client's request was never accepted.
func TestServe_IdleKeepAliveFloodLeavesRoomForOthers(t *testing.T) {
	const nofile, flood = 300, 400
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "j.db")
	cmd := exec.Command("sh", "-c", `ulimit -n `+strconv.Itoa(nofile)+` && exec "$0" "$@"`,
		exe, "--log-level", "info", "serve", "--db", db, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), childEnv+"=cli")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var mu sync.Mutex
	var lines []string
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			l := sc.Text()
			mu.Lock()
			lines = append(lines, l)
			mu.Unlock()
			if _, url, ok := strings.Cut(l, " on http://"); ok && strings.Contains(l, "journal: serving") {
				addr <- url
			}
		}
	}()
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
	var target string
	select {
	case target = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve never said where it listens:\n%s", logged())
	}
	m := regexp.MustCompile(`max_conns=(\d+) max_conns_per_addr=(\d+)`).FindStringSubmatch(logged())
	if m == nil {
		t.Fatalf("serve did not log its connection bounds:\n%s", logged())
	}
	perAddr, _ := strconv.Atoi(m[2])
	if m[1] != "150" || perAddr != 18 {
		t.Fatalf("bounds %s and %d under %d open files; want 150 and 18 (connlimit.ForFiles)", m[1], perAddr, nofile)
	}

	// The flood: every connection sends its request; each answer is
	// reported, and an answered 200 connection is kept open and idle.
	statuses := make(chan int, flood)
	for range flood {
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}).Dial("tcp", target)
		if err != nil {
			t.Fatalf("flood dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			if resp.Close {
				c.Close()
			}
			if resp.StatusCode == http.StatusServiceUnavailable && (resp.Header.Get("Retry-After") == "" || !resp.Close) {
				statuses <- -1 // refused without saying when to retry
				return
			}
			statuses <- resp.StatusCode
		}()
	}

	// Another client, from another address, is served.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext(ctx, network, a)
		},
	}}
	resp, err := client.Get("http://" + target + "/healthz")
	if err != nil {
		t.Fatalf("a request from another address during the flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a request from another address during the flood: status %d", resp.StatusCode)
	}

	// Every flood connection was answered: its share served, the rest
	// refused at once, with a 503 while few are being refused, and closed
	// without one beyond connlimit.MaxRefusing at a time.
	counts := map[int]int{}
	for range flood {
		select {
		case s := <-statuses:
			counts[s]++
		case <-time.After(60 * time.Second):
			t.Fatalf("flood connections left unanswered; answers so far %v", counts)
		}
	}
	if counts[http.StatusOK] != perAddr || counts[http.StatusServiceUnavailable]+counts[0] != flood-perAddr || counts[http.StatusServiceUnavailable] == 0 {
		t.Fatalf("flood answers %v (0: closed unanswered, -1: 503 without Retry-After or Connection: close); want %d of 200 and the other %d refused", counts, perAddr, flood-perAddr)
	}
	if n := strings.Count(logged(), "connlimit: connection limit reached"); n != 1 {
		t.Fatalf("%d log records of refusals for one flood of %d, want 1:\n%s", n, flood-perAddr, logged())
	}
}
