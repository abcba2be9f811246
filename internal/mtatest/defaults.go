package mtatest

// The default files of each daemon, as Debian's packages and their
// maintainer scripts leave them; the changes for a loopback test are
// marked "mtatest:". @HOSTNAME@, @IP@, @PORT@ and @ADDR@ are filled from
// Config.

// postfixMain is /etc/postfix/main.cf: Debian's main.cf.debian (the
// postinst copies it), then what postfix.postinst writes with postconf -e
// for an "Internet Site".
const postfixMain = `# Debian: /usr/share/postfix/main.cf.debian
smtpd_banner = $myhostname ESMTP $mail_name (Debian/GNU)
biff = no
append_dot_mydomain = no
readme_directory = no
compatibility_level = 3.6

# Debian: postfix.postinst, "Internet Site"
smtpd_relay_restrictions = permit_mynetworks permit_sasl_authenticated defer_unauth_destination
myhostname = @HOSTNAME@
alias_maps = hash:/etc/aliases
alias_database = hash:/etc/aliases
mydestination = $myhostname, localhost
relayhost =
mailbox_size_limit = 0
recipient_delimiter = +
inet_protocols = ipv4

# mtatest: the postinst's 127.0.0.0/8 would trust every client of a
# loopback world, the prober's addresses too: only the machine itself.
mynetworks = 127.0.0.1/32
# mtatest: Postfix binds only interface addresses here; master.cf binds
# the test's address (any 127.x.y.z) for smtpd.
inet_interfaces = 127.0.0.1
# mtatest: the log goes to standard output ("master -d").
maillog_file = /dev/stdout
`

// postfixMaster is /etc/postfix/master.cf: Debian's master.cf.dist, cut
// to the services an SMTP server that only answers RCPT needs, without
// chroot (the package's "y" needs a populated /var/spool/postfix), smtpd
// bound to the test's address. qmgr delivers nothing here (no message is
// ever queued) but stays: it keeps the in_flow_delay tokens coming,
// without which cleanup waits a second before every new message
// (postconf(5) in_flow_delay).
const postfixMaster = `# service type  private unpriv  chroot  wakeup  maxproc command + args
@ADDR@ inet  n       -       n       -       -       smtpd
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
proxymap  unix  -       -       n       -       -       proxymap
anvil     unix  -       -       n       -       1       anvil
postlog   unix-dgram n  -       n       -       1       postlogd
`

// postfixAliases is the /etc/aliases postfix.postinst creates.
const postfixAliases = `# See man 5 aliases for format
postmaster:    root
`

// debianAliases is the /etc/aliases exim4-config's postinst creates
// (writealiases).
const debianAliases = `# /etc/aliases
mailer-daemon: postmaster
postmaster: root
nobody: root
hostmaster: root
usenet: root
news: root
webmaster: root
www: root
ftp: root
abuse: root
noc: root
security: root
`

// eximDebconf is /etc/exim4/update-exim4.conf.conf as debconf writes it
// for "internet site; mail is sent and received directly using SMTP",
// listening on the test's address, with the split configuration
// (conf.d/), so that a test adds a router or macros as a file.
const eximDebconf = `dc_eximconfig_configtype='internet'
dc_other_hostnames=''
dc_local_interfaces='@IP@'
dc_readhost=''
dc_relay_domains=''
dc_minimaldns='false'
dc_relay_nets=''
dc_smarthost=''
CFILEMODE='644'
dc_use_split_config='true'
dc_hide_mailname=''
dc_mailname_in_oh='true'
dc_localdelivery='mail_spool'
`

// opensmtpdAliases is the /etc/aliases opensmtpd's postinst creates
// (without a root address).
const opensmtpdAliases = `# Enter mail aliases below in the format described by aliases(5)
# root:

# RFC 2142 NETWORK OPERATIONS MAILBOX NAMES
abuse:		root
noc:		root
security:	root

# RFC 2142 SUPPORT MAILBOX NAMES FOR SPECIFIC INTERNET SERVICES
postmaster:	root
hostmaster:	root
# usenet:	root
# news:		usenet
webmaster:	root
www:		webmaster
# uucp:		root
ftp:		root
`

// opensmtpdConf is the package's /etc/smtpd.conf, listening on the
// test's address instead of localhost.
const opensmtpdConf = `#	$OpenBSD: smtpd.conf,v 1.10 2018/05/24 11:40:17 gilles Exp $

# This is the smtpd server system-wide configuration file.
# See smtpd.conf(5) for more information.

table aliases file:/etc/aliases

# mtatest: the test's address, not localhost.
listen on @IP@ port @PORT@

action "local" maildir alias <aliases>
action "relay" relay

# Uncomment the following to accept external mail for domain "example.org"
#
# match from any for domain "example.org" action "local"
match for local action "local"
match from local for any action "relay"
`
