package main

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill the server if this program dies
// without stopping it (SIGKILL, a crash).
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
