package smtpclient

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fake is a scripted SMTP server on loopback, in the manner of go-smtp's
// faker: it plays a script line by line and records every byte the client
// sends, so the test can compare the client's transcript byte for byte.
//
// Script directives, one a line (blank lines and lines starting with # are
// skipped):
//
//	S: text      write text and CRLF
//	R: "quoted"  write the Go-quoted bytes as they are (malformed replies)
//	C: text      read one line from the client (expected: text and CRLF)
//	TLS          TLS handshake as the server, with the fake's tls.Config
//	TLSFAIL      TLS handshake as the server, which must fail
//	SLEEP 50ms   wait
//	OPEN 50ms    the client must keep the connection open, silent, that long
//	EOF          the client must close next (nothing more may come)
//	HANG         read and record until the client closes (never answer)
//	CLOSE        close now (the end of the script closes too)
type fake struct {
	addr   string
	script []string
	tls    *tls.Config
	ln     net.Listener
	done   chan struct{}

	mu        sync.Mutex
	got       strings.Builder // every byte the client sent
	errs      []string        // directives that failed
	tlsState  tls.ConnectionState
	tlsDone   bool
	serverEOF bool // the server saw EOF from the client before closing
}

// startFake listens on 127.0.0.1:0 and serves one connection with script.
func startFake(t *testing.T, script string) *fake {
	t.Helper()
	return startFakeTLS(t, script, nil)
}

func startFakeTLS(t *testing.T, script string, cfg *tls.Config) *fake {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{addr: ln.Addr().String(), tls: cfg, ln: ln, done: make(chan struct{})}
	for _, l := range strings.Split(script, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			f.script = append(f.script, l)
		}
	}
	go f.serve()
	t.Cleanup(func() {
		ln.Close()
		<-f.done
	})
	return f
}

func (f *fake) failf(msg string) {
	f.mu.Lock()
	f.errs = append(f.errs, msg)
	f.mu.Unlock()
}

func (f *fake) record(s string) {
	f.mu.Lock()
	f.got.WriteString(s)
	f.mu.Unlock()
}

func (f *fake) serve() {
	defer close(f.done)
	defer f.ln.Close()
	_ = f.ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	conn, err := f.ln.Accept()
	if err != nil {
		if !errors.Is(err, net.ErrClosed) {
			f.failf("accept: " + err.Error())
		}
		return
	}
	defer conn.Close()
	// No script may hang a test: the whole conversation gets 10 s.
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var c net.Conn = conn
	br := bufio.NewReader(c)
	for _, d := range f.script {
		verb, arg, _ := strings.Cut(d, " ")
		switch verb {
		case "S:":
			if _, err := io.WriteString(c, arg+"\r\n"); err != nil {
				f.failf("write " + strconv.Quote(arg) + ": " + err.Error())
				return
			}
		case "R:":
			raw, err := strconv.Unquote(arg)
			if err != nil {
				f.failf("bad R: directive " + arg)
				return
			}
			if _, err := io.WriteString(c, raw); err != nil {
				f.failf("write raw: " + err.Error())
				return
			}
		case "C:":
			line, err := br.ReadString('\n')
			f.record(line)
			if err != nil {
				f.failf("reading for " + strconv.Quote(arg) + ": " + err.Error())
				return
			}
		case "TLS":
			if br.Buffered() > 0 {
				f.failf("client sent data before the TLS handshake")
				return
			}
			tc := tls.Server(conn, f.tls)
			if err := tc.Handshake(); err != nil {
				f.failf("tls handshake: " + err.Error())
				return
			}
			f.mu.Lock()
			f.tlsState, f.tlsDone = tc.ConnectionState(), true
			f.mu.Unlock()
			c = tc
			br = bufio.NewReader(c)
		case "TLSFAIL":
			tc := tls.Server(conn, f.tls)
			if err := tc.Handshake(); err == nil {
				f.failf("tls handshake succeeded, want failure")
			}
			return
		case "SLEEP":
			d, _ := time.ParseDuration(arg)
			time.Sleep(d)
		case "OPEN":
			d, _ := time.ParseDuration(arg)
			_ = conn.SetReadDeadline(time.Now().Add(d))
			b, err := br.ReadByte()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			var ne net.Error
			switch {
			case err == nil:
				f.record(string(b))
				f.failf("client sent data while it should wait for the server to close")
				return
			case errors.Is(err, io.EOF):
				f.mu.Lock()
				f.serverEOF = true
				f.mu.Unlock()
				f.failf("client closed first")
				return
			case errors.As(err, &ne) && ne.Timeout():
			default:
				f.failf("OPEN: " + err.Error())
				return
			}
		case "EOF", "HANG":
			rest, err := io.ReadAll(br)
			f.record(string(rest))
			// A client that closes with unread data in its socket resets
			// the connection: that is closing too.
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				f.failf("waiting for the client to close: " + err.Error())
			}
			if verb == "EOF" && len(rest) > 0 {
				f.failf("client sent more before closing")
			}
			return
		case "CLOSE":
			return
		default:
			f.failf("unknown directive " + d)
			return
		}
	}
}

// check waits for the server to finish and compares the client's transcript
// with the script's C: lines, byte for byte.
func (f *fake) check(t *testing.T) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(15 * time.Second):
		t.Fatal("fake server did not finish")
	}
	var want strings.Builder
	for _, d := range f.script {
		if arg, ok := strings.CutPrefix(d, "C: "); ok {
			want.WriteString(arg + "\r\n")
		} else if d == "C:" {
			want.WriteString("\r\n")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.got.String(); got != want.String() {
		t.Errorf("client transcript differs\n got: %q\nwant: %q", got, want.String())
	}
	for _, e := range f.errs {
		t.Errorf("fake server: %s", e)
	}
}

// trackDialer dials loopback only and counts connections not yet closed.
type trackDialer struct {
	d    net.Dialer
	open atomic.Int64
}

type trackConn struct {
	net.Conn
	once sync.Once
	td   *trackDialer
}

func (c *trackConn) Close() error {
	c.once.Do(func() { c.td.open.Add(-1) })
	return c.Conn.Close()
}

func (td *trackDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, errors.New("test dialer: loopback only, not " + addr)
	}
	c, err := td.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	td.open.Add(1)
	return &trackConn{Conn: c, td: td}, nil
}

// newDialer returns a dialer whose connections must all be closed when the
// test ends.
func newDialer(t *testing.T) *trackDialer {
	td := &trackDialer{}
	t.Cleanup(func() {
		if n := td.open.Load(); n != 0 {
			t.Errorf("%d client connection(s) left open", n)
		}
	})
	return td
}

// testOptions are Options with small timeouts, so a failing test fails fast.
func testOptions() Options {
	return Options{
		HeloName:       "probe.verifyd.test",
		CommandTimeout: 5 * time.Second,
		SessionTimeout: 10 * time.Second,
		QuitWait:       2 * time.Second,
	}
}

var (
	certOnce sync.Once
	certPair tls.Certificate
	certPool *x509.CertPool
)

// testCert makes, once, a self-signed ECDSA certificate for mx.test.
func testCert(t testing.TB) (tls.Certificate, *x509.CertPool) {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "mx.test"},
			DNSNames:              []string{"mx.test"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(24 * time.Hour),
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			panic(err)
		}
		certPair = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}
		certPool = x509.NewCertPool()
		certPool.AddCert(cert)
	})
	return certPair, certPool
}
