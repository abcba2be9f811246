// Package smtpclient is the prober's SMTP client: it walks a session far
// enough to learn whether a server takes mail for an address, and
// classifies every reply by its code and enhanced status code (Classify,
// never by its text). Apart, ReadWording reads a reply's text against a
// table of the stock wordings of MTAs and providers (WORDINGS.md), for the
// engine's refusals whose codes say too little. It sends no message: there
// is no DATA.
//
// # The session
//
// A Client is an explicit state machine. Dial takes it from nothing to
// ready; the methods move it between ready and in-transaction; Quit, Close,
// a 421 or any transport or protocol failure end it.
//
//  1. Connect. Dialer.DialContext opens the TCP connection; the egress
//     package supplies a Dialer bound to one source address.
//  2. Greeting (RFC 5321 §3.1, §4.3.1). A 220 goes on, and its first word
//     is BannerHost. A 421 means the server is closing (§3.8): the client
//     waits for it to. A 554, or anything else, is refused politely: QUIT.
//  3. EHLO (RFC 5321 §4.1.1.1). The reply's first word is EHLOHost, each
//     further line an extension (Extensions). A 500 or 502 means the
//     server predates EHLO: say HELO instead (§4.1.4).
//  4. STARTTLS (RFC 3207), when the server offers it and Options.TLSConfig
//     is set. After the 220 the client refuses any byte already received
//     (§6: it would be taken as protected), shakes hands, records the TLS
//     version and cipher (TLSState), forgets the extensions learnt in the
//     clear and says EHLO again (§4.2). A 454 refusal leaves the session in
//     the clear unless Options.RequireTLS; a failed handshake ends it with
//     ErrTLSHandshake, and the caller may dial again without TLS.
//  5. MAIL FROM (RFC 5321 §4.1.1.2) opens a transaction (Mail), with the
//     SMTPUTF8 parameter when an address is internationalised (RFC 6531
//     §3.4). A refusal here is about the prober, never the mailbox.
//  6. RCPT TO (RFC 5321 §4.1.1.3), for one address (Rcpt) or many in one
//     session (RcptMany), pipelined in chunks when the server announced
//     PIPELINING (RFC 2920 §3.1), stopping at the server's recipient limit
//     (452 4.5.3, RFC 5321 §4.5.3.1.10) and handing back the addresses
//     left unchecked for another session.
//  7. RSET (RFC 5321 §4.1.1.5) ends the transaction (Reset); MAIL may
//     follow.
//  8. QUIT (RFC 5321 §4.1.1.10). Quit reads the 221 and then waits, briefly,
//     for the server to close first (§3.8), so that TIME_WAIT stays on the
//     server's side and not on the prober's few source addresses.
//
// Every step has a deadline: Options.CommandTimeout for the step, bounded
// by the session's (Options.SessionTimeout from Dial, or the context's
// deadline if earlier). Cancelling the context given to Dial ends the step
// under way at once. The client starts no goroutine of its own.
//
// # Replies
//
// A reply (RFC 5321 §4.2) is one or more lines "250-text", the last
// "250 text". The reader rejects, as ErrProtocol, a code that is not three
// digits in 200..599, a code that changes between lines, a missing
// separator, a line over MaxLineLen bytes and a reply over MaxLines lines;
// after that the connection is out of step and is closed. An enhanced
// status code (RFC 3463 §2, class.subject.detail) counts only at the start
// of a line's text and only when its class is the reply's first digit
// (RFC 2034 §4), whether or not ENHANCEDSTATUSCODES was announced.
//
// # Errors
//
// A refusing reply is an *Error: code, enhanced code, command and text,
// with Temporary for 4xx and Class for the engine. Everything else is an
// *OpError naming the step, which keeps its cause for errors.Is and
// errors.As: os.ErrDeadlineExceeded and net.Error for timeouts, the
// context's error, io.EOF when the server hung up, and this package's
// sentinels.
//
// # Classification
//
// Classify maps a reply to a Class: x.1.x no such mailbox, x.2.1 disabled,
// x.2.2 full, x.7.x policy about the prober, 4xx temporary, and so on. The
// full table, with what the engine concludes from each class, is in
// README.md beside this file.
//
// # Transcript
//
// With Options.Logger at debug level, every command sent and every reply
// read is logged ("smtp send", "smtp reply"). The prober sends nothing
// secret; commands are logged in one place, which redacts AUTH should it
// ever be used.
package smtpclient
