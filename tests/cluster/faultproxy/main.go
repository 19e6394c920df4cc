// faultproxy: a fault-injecting TLS proxy between a client (drainer) and
// kube-apiserver, for tests/e2e/test-faults.sh. Standard library only.
//
// It serves HTTP/2 and HTTP/1.1 (ALPN) with a certificate for 127.0.0.1 signed
// by the cluster CA, forwards every request to the real API server over TLS
// (headers as they came, Authorization and User-Agent included), streams
// responses with an immediate flush (watches), and injects faults chosen by
// rules that an admin endpoint can replace mid-run. Every request it receives
// is one JSON line in the request log, faulted or not.
//
// Rules (JSON array, first match wins; a rule matches by method, path regex and
// watch-or-not, then fires by "first" N matches, "every" Nth match or
// probability "prob", at most "max" times):
//
//	{"name": "429s", "method": "GET|POST", "path": "^/api/", "watch": false,
//	 "prob": 0.25, "every": 0, "first": 0, "max": 0,
//	 "action": "429|500|503|reset|reset-conn|stall|slow-body|cut-watch",
//	 "retry_after": 1, "after": false, "delay": "2s", "chunk": 256, "events": 1}
//
// Actions:
//   - 429, 500, 503: a Kubernetes Status answer (429: reason TooManyRequests,
//     Retry-After header and details.retryAfterSeconds = retry_after); with
//     "after": true the request is forwarded first and its answer replaced.
//   - reset: abort the stream (HTTP/2 RST_STREAM; HTTP/1.1 closes the connection);
//     reset-conn: close the client's TCP connection (every stream on it); both
//     before forwarding, or after it with "after": true (the answer is lost).
//   - stall: hold the request for "delay" (absent: until the client gives up),
//     then forward it.
//   - slow-body: forward the answer "chunk" bytes at a time, "delay" apart.
//   - cut-watch: on a watch, forward "events" event lines, then half of the
//     next one, then abort the stream ("conn": true closes the connection).
//
// Admin endpoint (-admin): GET /rules, PUT /rules (replaces them, counters
// reset), GET /stats (per-rule match/fire counts), GET /healthz.
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	mrand "math/rand"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

type rule struct {
	Name       string  `json:"name,omitempty"`
	Method     string  `json:"method,omitempty"` // regex over the method, anchored
	Path       string  `json:"path,omitempty"`   // regex over path?query
	Watch      *bool   `json:"watch,omitempty"`
	Prob       float64 `json:"prob,omitempty"`
	Every      int     `json:"every,omitempty"`
	First      int     `json:"first,omitempty"`
	Max        int     `json:"max,omitempty"`
	Action     string  `json:"action"`
	RetryAfter int     `json:"retry_after,omitempty"`
	After      bool    `json:"after,omitempty"`
	Conn       bool    `json:"conn,omitempty"`
	Delay      string  `json:"delay,omitempty"`
	Chunk      int     `json:"chunk,omitempty"`
	Events     int     `json:"events,omitempty"`

	methodRe, pathRe *regexp.Regexp
	delay            time.Duration
	matched, fired   int
}

type proxy struct {
	upstream *url.URL
	client   *http.Transport
	mu       sync.Mutex
	rules    []*rule
	rng      *mrand.Rand
	logMu    sync.Mutex
	logw     io.Writer
}

type connKey struct{}

var validActions = map[string]bool{"429": true, "500": true, "503": true, "reset": true, "reset-conn": true,
	"stall": true, "slow-body": true, "cut-watch": true, "pass": true}

func compileRules(data []byte) ([]*rule, error) {
	var rs []*rule
	if err := json.Unmarshal(data, &rs); err != nil {
		return nil, err
	}
	for i, r := range rs {
		if !validActions[r.Action] {
			return nil, fmt.Errorf("rule %d: unknown action %q", i, r.Action)
		}
		var err error
		if r.Method != "" {
			if r.methodRe, err = regexp.Compile("^(?:" + r.Method + ")$"); err != nil {
				return nil, fmt.Errorf("rule %d: method: %v", i, err)
			}
		}
		if r.Path != "" {
			if r.pathRe, err = regexp.Compile(r.Path); err != nil {
				return nil, fmt.Errorf("rule %d: path: %v", i, err)
			}
		}
		if r.Delay != "" {
			if r.delay, err = time.ParseDuration(r.Delay); err != nil {
				return nil, fmt.Errorf("rule %d: delay: %v", i, err)
			}
		}
		if r.Name == "" {
			r.Name = fmt.Sprintf("%d-%s", i, r.Action)
		}
		if r.Chunk <= 0 {
			r.Chunk = 256
		}
		if r.RetryAfter <= 0 && r.Action == "429" {
			r.RetryAfter = 1
		}
	}
	return rs, nil
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}

// pick returns the rule that fires for this request, or nil.
func (p *proxy) pick(r *http.Request) *rule {
	watch := isWatch(r)
	uri := r.URL.RequestURI()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ru := range p.rules {
		if ru.methodRe != nil && !ru.methodRe.MatchString(r.Method) {
			continue
		}
		if ru.pathRe != nil && !ru.pathRe.MatchString(uri) {
			continue
		}
		if ru.Watch != nil && *ru.Watch != watch {
			continue
		}
		if (ru.Action == "cut-watch") && !watch {
			continue
		}
		ru.matched++
		fire := true
		switch {
		case ru.First > 0:
			fire = ru.matched <= ru.First
		case ru.Every > 0:
			fire = ru.matched%ru.Every == 0
		case ru.Prob > 0:
			fire = p.rng.Float64() < ru.Prob
		}
		if fire && ru.Max > 0 && ru.fired >= ru.Max {
			fire = false
		}
		if fire {
			ru.fired++
			return ru
		}
		// a rule that matched but did not fire lets the later rules try
	}
	return nil
}

type logEntry struct {
	Time   string  `json:"t"`
	Unix   float64 `json:"ts"`
	Method string  `json:"method"`
	URI    string  `json:"uri"`
	UA     string  `json:"ua"`
	Watch  bool    `json:"watch"`
	Fault  string  `json:"fault"`
	Rule   string  `json:"rule,omitempty"`
	Status int     `json:"status"`
	Retry  int     `json:"retry_after,omitempty"`
	// An injected status answer was flushed to the connection (false: the client
	// went away, e.g. its connection was reset by another rule, before it got it).
	Delivered *bool   `json:"delivered,omitempty"`
	Proto     string  `json:"proto"`
	Remote    string  `json:"remote"`
	Secs      float64 `json:"secs"`
	Note      string  `json:"note,omitempty"`
	Body      string  `json:"body,omitempty"` // sha256 prefix of the request body, to tell a retry from a new request
	// The client's Audit-ID header: drainer sends a new one with each attempt of its
	// own, while libcurl's transparent resend of a request repeats its headers.
	AuditID string `json:"audit_id,omitempty"`
	written bool
}

func (p *proxy) logLine(e *logEntry, start time.Time) {
	if e.written {
		return
	}
	e.written = true
	e.Secs = time.Since(start).Seconds()
	b, _ := json.Marshal(e)
	p.logMu.Lock()
	p.logw.Write(append(b, '\n'))
	p.logMu.Unlock()
}

var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func statusBody(code int, reason, msg string, retryAfter int) []byte {
	st := map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code}
	if retryAfter > 0 {
		st["details"] = map[string]any{"retryAfterSeconds": retryAfter}
	}
	b, _ := json.Marshal(st)
	return b
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	e := &logEntry{Time: start.UTC().Format("2006-01-02T15:04:05.000000Z"),
		Unix: float64(start.UnixMicro()) / 1e6, Method: r.Method, URI: r.URL.RequestURI(),
		UA: r.UserAgent(), Watch: isWatch(r), Fault: "pass", Proto: r.Proto, Remote: r.RemoteAddr,
		AuditID: r.Header.Get("Audit-Id")}
	defer p.logLine(e, start)
	var reqBody []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		if reqBody, err = io.ReadAll(io.LimitReader(r.Body, 16<<20)); err != nil {
			e.Note = "reading the request body: " + err.Error()
			abort0(p, e, start)
		}
		if len(reqBody) > 0 {
			e.Body = fmt.Sprintf("%x", sha256.Sum256(reqBody))[:16]
		}
	}
	ru := p.pick(r)
	action := "pass"
	if ru != nil {
		action = ru.Action
		e.Fault, e.Rule = ru.Action, ru.Name
		if ru.After && (action == "reset" || action == "reset-conn" || action == "429" || action == "500" || action == "503") {
			e.Fault += "-after"
		}
	}
	abort := func(conn bool) {
		e.Status = 0
		p.logLine(e, start)
		if conn {
			if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
				c.Close()
			}
		}
		panic(http.ErrAbortHandler)
	}
	statusAnswer := func(code int) {
		reason := map[int]string{429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}[code]
		ra := 0
		if ru.RetryAfter > 0 {
			ra = ru.RetryAfter
			w.Header().Set("Retry-After", fmt.Sprint(ra))
			e.Retry = ra
		}
		body := statusBody(code, reason, "injected by faultproxy ("+ru.Name+")", ra)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		e.Status = code
		w.WriteHeader(code)
		_, werr := w.Write(body)
		ferr := http.NewResponseController(w).Flush()
		ok := werr == nil && ferr == nil && r.Context().Err() == nil
		e.Delivered = &ok
		p.logLine(e, start)
	}

	switch action {
	case "429", "500", "503":
		if !ru.After {
			statusAnswer(map[string]int{"429": 429, "500": 500, "503": 503}[action])
			return
		}
	case "reset", "reset-conn":
		if !ru.After {
			abort(action == "reset-conn")
		}
	case "stall":
		if ru.delay > 0 {
			select {
			case <-time.After(ru.delay):
			case <-r.Context().Done():
				e.Note = "client gave up while stalled"
				abort(false)
			}
		} else {
			<-r.Context().Done()
			e.Note = "client gave up while stalled"
			abort(false)
		}
	}

	// Forward.
	var body io.Reader
	if reqBody != nil {
		body = bytes.NewReader(reqBody)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream.String()+r.URL.RequestURI(), body)
	if err != nil {
		e.Note = err.Error()
		e.Status = 502
		w.WriteHeader(502)
		return
	}
	out.ContentLength = int64(len(reqBody))
	for k, vs := range r.Header {
		out.Header[k] = append([]string(nil), vs...)
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	resp, err := p.client.RoundTrip(out)
	if err != nil {
		e.Note = "upstream: " + err.Error()
		if r.Context().Err() != nil {
			abort(false)
		}
		body := statusBody(502, "InternalError", "faultproxy: upstream: "+err.Error(), 0)
		e.Status = 502
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(502)
		w.Write(body)
		return
	}
	defer resp.Body.Close()
	if ru != nil && ru.After {
		switch action {
		case "reset", "reset-conn":
			drain(resp, e.Watch)
			e.Note = fmt.Sprintf("upstream answered %d, dropped", resp.StatusCode)
			abort(action == "reset-conn")
		case "429", "500", "503":
			drain(resp, e.Watch)
			e.Note = fmt.Sprintf("upstream answered %d, replaced", resp.StatusCode)
			statusAnswer(map[string]int{"429": 429, "500": 500, "503": 503}[action])
			return
		}
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	if action == "slow-body" || action == "cut-watch" {
		w.Header().Del("Content-Length")
	}
	e.Status = resp.StatusCode
	if e.Watch {
		p.logLine(e, start) // a watch may last long: its line is written when it starts
	}
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	flush()

	switch action {
	case "slow-body":
		// Whatever arrived goes out in chunks, delay apart (never held back
		// waiting for a full chunk: a watch's last event would stay here).
		buf := make([]byte, 32*1024)
		delay := ru.delay
		if delay <= 0 {
			delay = 20 * time.Millisecond
		}
		for {
			n, err := resp.Body.Read(buf)
			for off := 0; off < n; off += ru.Chunk {
				end := min(off+ru.Chunk, n)
				if _, werr := w.Write(buf[off:end]); werr != nil {
					return
				}
				flush()
				time.Sleep(delay)
			}
			if err != nil {
				return
			}
		}
	case "cut-watch":
		if resp.StatusCode != 200 {
			break
		}
		var line bytes.Buffer
		events := 0
		buf := make([]byte, 32*1024)
		for {
			n, err := resp.Body.Read(buf)
			for _, c := range buf[:n] {
				line.WriteByte(c)
				if c != '\n' {
					continue
				}
				if events >= ru.Events {
					half := line.Bytes()[:line.Len()/2]
					w.Write(half)
					flush()
					time.Sleep(50 * time.Millisecond)
					e.Note = fmt.Sprintf("cut after %d events, %d of %d bytes of the next", events, len(half), line.Len())
					p.appendNote(e)
					if c, ok := r.Context().Value(connKey{}).(net.Conn); ok && ru.Conn {
						c.Close()
					}
					panic(http.ErrAbortHandler)
				}
				if _, werr := w.Write(line.Bytes()); werr != nil {
					return
				}
				flush()
				line.Reset()
				events++
			}
			if err != nil {
				return
			}
		}
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			flush()
		}
		if err != nil {
			return
		}
	}
}

// drain reads a dropped answer to its end, but not a watch's (it would last minutes).
func drain(resp *http.Response, watch bool) {
	if !watch {
		io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
}

func abort0(p *proxy, e *logEntry, start time.Time) {
	p.logLine(e, start)
	panic(http.ErrAbortHandler)
}

// appendNote writes an extra line for a watch whose line was written at its start.
func (p *proxy) appendNote(e *logEntry) {
	b, _ := json.Marshal(map[string]any{"t": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		"event": "cut-watch", "uri": e.URI, "note": e.Note})
	p.logMu.Lock()
	p.logw.Write(append(b, '\n'))
	p.logMu.Unlock()
}

func (p *proxy) admin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/rules", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "GET":
			p.mu.Lock()
			b, _ := json.MarshalIndent(p.rules, "", "  ")
			p.mu.Unlock()
			w.Write(append(b, '\n'))
		case "PUT", "POST":
			data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			rs, err := compileRules(data)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			p.mu.Lock()
			p.rules = rs
			p.mu.Unlock()
			fmt.Fprintf(w, "%d rules\n", len(rs))
		default:
			http.Error(w, "GET or PUT", 405)
		}
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		out := []map[string]any{}
		for _, ru := range p.rules {
			out = append(out, map[string]any{"name": ru.Name, "action": ru.Action, "matched": ru.matched, "fired": ru.fired})
		}
		p.mu.Unlock()
		b, _ := json.Marshal(out)
		w.Write(append(b, '\n'))
	})
	return mux
}

func loadCA(certFile, keyFile string) (*x509.Certificate, any, []byte, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil {
		return nil, nil, nil, errors.New("no PEM in " + certFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	var key any
	for rest := keyPEM; ; {
		var kb *pem.Block
		kb, rest = pem.Decode(rest)
		if kb == nil {
			break
		}
		switch kb.Type {
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(kb.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, nil, nil, err
		}
		break
	}
	if key == nil {
		return nil, nil, nil, errors.New("no private key in " + keyFile)
	}
	return cert, key, certPEM, nil
}

func serverCert(ca *x509.Certificate, caKey any) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "faultproxy"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:61500", "TLS address drainer talks to")
	adminAddr := flag.String("admin", "127.0.0.1:61501", "admin HTTP address (rules, stats)")
	upstream := flag.String("upstream", "", "API server URL, e.g. https://127.0.0.1:16443")
	caFile := flag.String("ca", "", "cluster CA certificate (trusted upstream; signs our certificate)")
	caKeyFile := flag.String("ca-key", "", "cluster CA key")
	rulesFile := flag.String("rules", "", "initial rules (JSON file)")
	logFile := flag.String("log", "", "request log (JSON lines; default stdout)")
	seed := flag.Int64("seed", 0, "random seed (0: from the clock)")
	flag.Parse()
	if *upstream == "" || *caFile == "" || *caKeyFile == "" {
		log.Fatal("need -upstream, -ca and -ca-key")
	}
	up, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	ca, caKey, caPEM, err := loadCA(*caFile, *caKeyFile)
	if err != nil {
		log.Fatal(err)
	}
	cert, err := serverCert(ca, caKey)
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	p := &proxy{
		upstream: up,
		client: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2:   true,
			MaxIdleConnsPerHost: 16,
			DisableCompression:  true,
		},
		rng:  mrand.New(mrand.NewSource(*seed)),
		logw: os.Stdout,
	}
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		p.logw = f
	}
	if *rulesFile != "" {
		data, err := os.ReadFile(*rulesFile)
		if err != nil {
			log.Fatal(err)
		}
		if p.rules, err = compileRules(data); err != nil {
			log.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	aln, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Handler:   p,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() { log.Fatal(http.Serve(aln, p.admin())) }()
	log.Printf("faultproxy: https://%s -> %s, admin http://%s", ln.Addr(), up, aln.Addr())
	log.Fatal(srv.ServeTLS(ln, "", ""))
}
