package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill cmd's process when the test process
// that started it dies, so that a test binary killed by its timeout (or
// by hand) leaves no redis-server behind, holding a port and whatever
// file descriptors it inherited.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
