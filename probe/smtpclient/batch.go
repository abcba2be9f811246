package smtpclient

// PipelineChunk is how many RCPT commands RcptMany sends before reading
// their replies when the server announced PIPELINING (RFC 2920 §3.1). Small
// enough that neither side's socket buffers can fill while the other waits.
const PipelineChunk = 50

// RcptResult is the answer to one RCPT of RcptMany.
type RcptResult struct {
	Addr  string
	Reply Reply
	// Class classifies Reply with ClassifyRcpt, counting the recipients
	// accepted before it in the transaction.
	Class Classification
}

// RcptMany checks many addresses of one domain in the current transaction,
// the batch mode's primitive: RCPT TO for each, pipelined in chunks of
// PipelineChunk when the server announced PIPELINING (RFC 2920), one at a
// time otherwise.
//
// results holds a result for every address that got a verdict, in order.
// RcptMany stops at the first reply that says the transaction's recipient
// limit is reached (TooManyRecipients: x.5.3, or a bare 452 after an
// accepted recipient, RFC 5321 §4.5.3.1.10); rest then holds that address
// and every one after it, for the caller to check in a new session. Replies
// to commands already pipelined after the cut-off are read to keep the
// session in step and dropped. When rest is all of addrs and nothing was
// accepted before, the server will not take even one recipient: do not
// loop.
//
// A refusal of one address is a result, not an error. err is non-nil when
// the session ended: a transport or protocol failure (*OpError), or a 421
// (*Error, also the last result); rest then holds the addresses without a
// verdict. An address that cannot go into a path (ErrBadPath, ErrSMTPUTF8)
// fails the call before anything is sent.
func (c *Client) RcptMany(addrs []string) (results []RcptResult, rest []string, err error) {
	if err := c.need(CmdRcpt, stateMail); err != nil {
		return nil, addrs, err
	}
	for _, a := range addrs {
		if err := checkPath(CmdRcpt, a, c.utf8); err != nil {
			return nil, addrs, err
		}
	}
	chunk := 1
	if c.ext.Pipelining {
		chunk = PipelineChunk
	}
	results = make([]RcptResult, 0, len(addrs))
	for i := 0; i < len(addrs); i += chunk {
		batch := addrs[i:min(i+chunk, len(addrs))]
		c.arm()
		for _, a := range batch {
			c.write(CmdRcpt, "RCPT TO:<", a, ">")
		}
		if err := c.w.Flush(); err != nil {
			return results, addrs[i:], c.fail(CmdRcpt, err)
		}
		if err := c.resetReply(); err != nil {
			return nil, addrs, err
		}
		if c.mailPending {
			if err := c.mailReply(len(batch)); err != nil {
				return nil, addrs, err
			}
		}
		cut := -1
		for j, a := range batch {
			r, err := c.reply(CmdRcpt)
			if err != nil {
				if cut >= 0 {
					return results, addrs[i+cut:], err
				}
				return results, addrs[i+j:], err
			}
			if cut >= 0 {
				continue
			}
			cl := ClassifyRcpt(r, c.accepted)
			switch cl.Class {
			case TooManyRecipients:
				cut = j
				continue
			case Accepted:
				c.accepted++
			}
			results = append(results, RcptResult{Addr: a, Reply: r, Class: cl})
			if r.Code == CodeServiceUnavailable {
				// The server closes now; it answers nothing more.
				return results, addrs[i+j+1:], c.refused(CmdRcpt, r)
			}
		}
		if cut >= 0 {
			return results, addrs[i+cut:], nil
		}
	}
	return results, nil, nil
}
