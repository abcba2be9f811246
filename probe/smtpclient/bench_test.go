package smtpclient

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// benchServer is a minimal SMTP server for benchmarks: it answers by verb,
// accepts every recipient and closes after QUIT, as a well-behaved MX does.
type benchServer struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startBenchServer(tb testing.TB) *benchServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &benchServer{ln: ln}
	s.wg.Add(1)
	go s.accept()
	tb.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *benchServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.serve(c)
	}
}

const benchEHLO = "250-mx.bench.test\r\n250-PIPELINING\r\n250-SIZE 52428800\r\n250-8BITMIME\r\n" +
	"250-ENHANCEDSTATUSCODES\r\n250 SMTPUTF8\r\n"

func (s *benchServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	w.WriteString("220 mx.bench.test ESMTP\r\n")
	w.Flush()
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		verb := strings.ToUpper(string(line[:min(4, len(line))]))
		switch verb {
		case "EHLO":
			w.WriteString(benchEHLO)
		case "MAIL":
			w.WriteString("250 2.1.0 Ok\r\n")
		case "RCPT":
			w.WriteString("250 2.1.5 Ok\r\n")
		case "RSET":
			w.WriteString("250 2.0.0 Ok\r\n")
		case "QUIT":
			w.WriteString("221 2.0.0 Bye\r\n")
			w.Flush()
			return
		default:
			w.WriteString("502 5.5.2 Error: command not recognized\r\n")
		}
		if r.Buffered() == 0 {
			w.Flush()
		}
	}
}

// BenchmarkSession is one fresh probe session: dial, banner, EHLO, MAIL,
// RCPT, QUIT (the server closes first), against an in-process server that
// shares the CPU.
func BenchmarkSession(b *testing.B) {
	s := startBenchServer(b)
	addr := s.ln.Addr().String()
	d := &net.Dialer{}
	opts := Options{HeloName: "probe.verifyd.test", CommandTimeout: 5 * time.Second}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := Dial(ctx, d, addr, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Mail("", false); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Rcpt("someone@example.test"); err != nil {
			b.Fatal(err)
		}
		if err := c.Quit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionParallel is BenchmarkSession with 8 sessions per CPU
// under way at once, as the prober runs them: its ns/op is the inverse of
// sessions per second.
func BenchmarkSessionParallel(b *testing.B) {
	s := startBenchServer(b)
	addr := s.ln.Addr().String()
	d := &net.Dialer{}
	opts := Options{HeloName: "probe.verifyd.test", CommandTimeout: 5 * time.Second}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c, err := Dial(context.Background(), d, addr, opts)
			if err != nil {
				b.Error(err)
				return
			}
			if err := c.Mail("", false); err != nil {
				b.Error(err)
			}
			if _, err := c.Rcpt("someone@example.test"); err != nil {
				b.Error(err)
			}
			if err := c.Quit(); err != nil {
				b.Error(err)
			}
		}
	})
}

// BenchmarkRcptMany100 is one session checking 100 addresses, pipelined.
func BenchmarkRcptMany100(b *testing.B) {
	s := startBenchServer(b)
	addr := s.ln.Addr().String()
	d := &net.Dialer{}
	opts := Options{HeloName: "probe.verifyd.test", CommandTimeout: 5 * time.Second}
	as := addrs(100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := Dial(context.Background(), d, addr, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Mail("", false); err != nil {
			b.Fatal(err)
		}
		res, rest, err := c.RcptMany(as)
		if err != nil || len(rest) != 0 || len(res) != 100 {
			b.Fatal(len(res), rest, err)
		}
		if err := c.Quit(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseReply(b *testing.B) {
	br := bufio.NewReaderSize(strings.NewReader(""), MaxLineLen)
	rr := replyReader{r: br}
	rd := strings.NewReader("")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rd.Reset(benchEHLO)
		br.Reset(rd)
		if _, err := rr.read(); err != nil {
			b.Fatal(err)
		}
	}
}
