package approve_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sema-agent/sema/executor/approve"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/nexting"
	"github.com/sema-agent/sema/protocol"
)

// openPTY returns a pseudo-terminal's master and the path of its slave: a
// real tty device that serial.Open configures like a serial port.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	master := os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() { master.Close() })
	return master, fmt.Sprintf("/dev/pts/%d", n)
}

// The gate over serial:DEV, with the simulator on the other end of a
// pseudo-terminal: the device's allow runs the instruction.
func TestGateOverASerialPort(t *testing.T) {
	master, slave := openPTY(t)
	clk := clock.NewFake(epoch)
	sim, err := nexting.NewSim(nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := nexting.ServeSim(master, sim, clk)
	t.Cleanup(func() { sc.Close() })
	tg, err := approve.ParseTarget("serial:"+slave+"@115200", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	g, err := approve.New(approve.Config{WorkspaceRoot: ws, Device: tg.String(), Dial: tg.Dial, Clock: watch(clk)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx := testCtx(t)
	if err := g.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	r := &runner{}
	out := gated(ctx, g, ops.Request{InstructionID: "ins_1", Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "git push"}, Timeout: time.Minute}, r)
	v := waitView(ctx, t, sc, "the prompt", pending)
	if v.Summary != "Run: git push" {
		t.Errorf("the device shows %q", v.Summary)
	}
	if !sc.Press(nexting.ChoiceAllow) {
		t.Fatal("allow was not sent")
	}
	if o := wait(ctx, t, out); o.Kind() != protocol.OutcomeExec || r.calls.Load() != 1 {
		t.Fatalf("outcome %+v after %d runs", o, r.calls.Load())
	}
}
