//go:build !linux

package main

import "syscall"

// dieWithParent: elsewhere a killed clusterbench leaves its brokers
// running (stop ends them on every other exit).
func dieWithParent() *syscall.SysProcAttr { return nil }
