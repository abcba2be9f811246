package probe

import (
	"fmt"
	"strings"

	"github.com/verifyd/verifyd/probe/smtpclient"
)

// BounceNoMailbox reports whether a bounce says the mailbox does not
// exist: the remote server's reply code, enhanced code and text, read as
// a reply to RCPT by the same rules the probe reads (RFC 3463 codes, and
// the provider's own wording when mxHost is one of a provider's hosts),
// plus 5.1.10, which Microsoft's servers send for an unknown recipient
// in a non-delivery report (RFC 7505 gives it to a null MX, which a bounce
// of an address that was sent to does not mean). A class inferred from a
// bare code (550 without an enhanced code) is not enough: a bounce is
// also sent for spam and policy refusals.
func BounceNoMailbox(code int, enhanced, text, mxHost string) bool {
	if code == 0 && enhanced == "" {
		return false
	}
	if enhanced == "5.1.10" {
		return true
	}
	if code == 0 {
		code = 550
		if strings.HasPrefix(enhanced, "4.") {
			code = 450
		}
	}
	line := fmt.Sprintf("%d %s %s\r\n", code, enhanced, strings.NewReplacer("\r", " ", "\n", " ").Replace(text))
	r, err := smtpclient.ParseReply([]byte(line))
	if err != nil || r.Code/100 != 5 {
		return false
	}
	cls := smtpclient.ClassifyRcpt(r, 0)
	if p := providerIndex.byMX(mxHost); p != nil {
		if c, ruled := p.classify(r, cls); ruled {
			return c.Class == smtpclient.NoMailbox
		}
	}
	return cls.Class == smtpclient.NoMailbox && !cls.Weak
}
