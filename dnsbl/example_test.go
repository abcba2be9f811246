package dnsbl_test

import (
	"fmt"
	"net/netip"

	"github.com/verifyd/verifyd/dnsbl"
)

func ExampleClassify() {
	ip := netip.MustParseAddr("192.0.2.99")
	name, _ := dnsbl.Name(ip, "zen.spamhaus.org")
	fmt.Println(name)
	for _, answer := range [][]netip.Addr{
		nil, // NXDOMAIN
		{netip.MustParseAddr("127.0.0.4")},
		{netip.MustParseAddr("127.255.255.254")},
	} {
		listed, err := dnsbl.Classify(answer)
		fmt.Println(listed, err != nil)
	}
	// Output:
	// 99.2.0.192.zen.spamhaus.org
	// false false
	// true false
	// false true
}
