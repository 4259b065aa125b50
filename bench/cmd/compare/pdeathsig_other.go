//go:build !linux

package main

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent death
// signal; the server is still stopped on every normal exit path.
func setParentDeathSignal(*exec.Cmd) {}
