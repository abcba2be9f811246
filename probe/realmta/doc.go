// Package realmta checks the engine's verdicts against real mail servers:
// Postfix 3.7, Exim 4.96 and OpenSMTPD 6.8 as Debian 12 ships them, run by
// internal/mtatest. It holds no code, only tests (and this page); the table
// of cases, with the source of every expectation, is README.md.
//
// How a case runs:
//
//  1. TestMain starts the simulated world's DNS server (bench/world) on
//     127.35.0.53, port 53, the port the MTAs' C library asks. The world
//     knows every domain of the cases, whose MX hosts are the MTAs' loopback
//     addresses, and one DNS block list, dnsbl.test, which lists two of the
//     engine's egress addresses. The world's own SMTP servers are not
//     started: the MTAs are the mail hosts.
//  2. A test per MTA starts each setup of that MTA (mtatest: the stock
//     Debian configuration, a virtual domain, a DNS block list, greylisting
//     with postgrey, a recipient limit), each on its own address, port 25,
//     with the configuration files the setup writes, as an administrator
//     would.
//  3. Each case first asks the MTA itself, in a plain SMTP session from one
//     of the egress addresses (EHLO, MAIL, the case's RCPTs, QUIT), and
//     checks that the reply is the one the MTA's documentation or source
//     gives for that situation: the expected verdict is derived from what
//     that reply means (the source, cited per case), never from running the
//     engine. The raw reply is logged.
//  4. Then a new engine, with its own egress pool (the case's addresses)
//     and a resolver on the world's DNS, validates the address within the
//     case's budget (Verify), or the case's addresses in one batch
//     (VerifyDomain), and the verdict and reason are compared with the
//     expectation.
//
// The verdicts mean what spec §2.3 says: valid, the mailbox accepts mail;
// risky, accept-all or low confidence (a full mailbox); invalid,
// undeliverable (refused, or no such mailbox); unknown, could not be
// determined (a temporary failure, a timeout, a refusal of the prober
// rather than of the mailbox).
//
// Run them with "make test", or alone (root; "make mta" unpacks the
// packages first):
//
//	VERIFYD_MTA_TESTS=require go test -race -count=1 -v ./probe/realmta
package realmta
