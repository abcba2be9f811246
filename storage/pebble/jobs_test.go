package pebble

import "fmt"

// addresses returns n distinct addresses (storagetest.Addresses).
func addresses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user%d@example.com", i)
	}
	return out
}
