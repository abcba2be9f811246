// Package platform turns the delivery-outcome webhooks of four sending
// platforms into normalized events, after checking each platform's own
// authentication. verifyd receives them at
// /v1/outcomes/{platform}?account=ID: the HTTP handler reads the
// account's settings, calls the platform's Receive with the raw body and
// the headers it needs, and stores the events it gets back. The package
// knows nothing of HTTP servers or of verifyd's storage.
//
// Each Receive goes the same way:
//
//  1. Authenticate, before the body is trusted, by the platform's scheme
//     (below).
//  2. Read the events the platform documents, at most MaxEvents a request,
//     and map each kind to one of the five types (Delivered, HardBounce,
//     SoftBounce, Complaint, Unsubscribed). Kinds verifyd does not use
//     (opens, clicks, processed, deferred or delayed mail, ...) are counted
//     in Result.Skipped, not refused.
//  3. Settle each event: the platform's event id (or a stable hash of the
//     platform and the raw event when it has none), the recipient as the
//     platform wrote it, the time in UTC, and the remote server's reply code
//     (RFC 5321 section 4.2) and enhanced status code (RFC 3463 section 2),
//     taken from the platform's fields or read from the diagnostic text by
//     ParseSMTP.
//
// The schemes:
//
//   - SNS (Amazon SES): refuse a topic that is not the account's; fetch the
//     signing certificate the message names, over HTTPS and only from an
//     allowed host (cached by URL); check its chain and validity; verify the
//     RSA signature (SHA-1 for SignatureVersion 1, SHA-256 for 2) over AWS's
//     string to sign; confirm a subscription with a GET of its SubscribeURL.
//   - SendGrid: verify the ECDSA P-256 signature (SHA-256, ASN.1 DER) over
//     the timestamp header and the raw body with the account's key; refuse
//     a timestamp more than 5 minutes from now.
//   - Mailgun: verify the HMAC-SHA256 of the signature's timestamp and token
//     with the account's signing key; refuse a timestamp more than 5 minutes
//     from now and a token seen before.
//   - Postmark: compare the basic-auth credentials (RFC 7617) with the
//     account's user and password hash.
//
// A bounce is hard or soft as the platform says (SES bounceType, SendGrid
// type, Mailgun severity, Postmark Type): a soft report with a 5.x.x code
// stays soft. README.md has the mapping of every platform, what is
// skipped and why, and the vendor documentation followed.
//
// Every refusal is an *Error whose Kind says what failed, for counting
// and for the answer: ErrSignature (not authentic), ErrPayload
// (malformed), ErrNotAllowed (topic or URL not allowed), ErrConfig (the
// account's settings are unusable), ErrUnavailable (a fetch failed: try
// again). Its text is for logs only.
package platform
