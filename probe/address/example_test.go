package address_test

import (
	"errors"
	"fmt"

	"github.com/verifyd/verifyd/probe/address"
)

func ExampleParse() {
	a, err := address.Parse("Jürgen@BÜCHER.de")
	if err != nil {
		panic(err)
	}
	fmt.Println(a.String())    // for the receipt
	fmt.Println(a.ASCII())     // for RCPT TO
	fmt.Println(a.ASCIIDomain) // for DNS
	fmt.Println(a.UTF8Local)   // needs SMTPUTF8

	_, err = address.Parse("john..doe@example.com")
	var se *address.SyntaxError
	fmt.Println(errors.As(err, &se), se.Reason)
	// Output:
	// Jürgen@bücher.de
	// Jürgen@xn--bcher-kva.de
	// xn--bcher-kva.de
	// true
	// true consecutive dots in local part
}
