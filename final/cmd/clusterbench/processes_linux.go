package main

import "syscall"

// dieWithParent makes a broker process end with clusterbench, even a
// clusterbench killed with SIGKILL (Linux's parent-death signal).
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
