package pgserver

import "syscall"

// setDeathSignal asks the kernel to send sig to the child when its parent dies.
func setDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) { attr.Pdeathsig = sig }
