//go:build !linux

package mtatest

import "syscall"

// procAttr: namespaces are Linux's; elsewhere Available says no first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
