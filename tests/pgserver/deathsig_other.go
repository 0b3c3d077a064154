//go:build !linux

package pgserver

import "syscall"

// setDeathSignal does nothing where the kernel has no parent-death signal: there, a server whose
// test binary was killed is stopped by the next Start's sweep.
func setDeathSignal(*syscall.SysProcAttr, syscall.Signal) {}
