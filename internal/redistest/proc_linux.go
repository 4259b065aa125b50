package redistest

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill the server when the test
// process dies without stopping it (SIGKILL, a crash, a timeout).
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
