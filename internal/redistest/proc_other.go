//go:build !linux

package redistest

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent death
// signal: the server is still stopped by Stop, which every test registers.
func setParentDeathSignal(*exec.Cmd) {}
